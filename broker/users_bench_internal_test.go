package broker

import (
	"encoding/binary"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
)

// BenchmarkArgon2id is the cost of one password check that misses the
// verified-passwords cache: a first login, a failed one, a user created.
func BenchmarkArgon2id(b *testing.B) {
	stored, err := hashPassword("secret-password")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if verifyPassword(stored, "wrong-password") {
			b.Fatal("a wrong password verified")
		}
	}
}

// BenchmarkGate is the permission gate's cost on a send of a user whose
// only right is send_messages on the topic (root skips the gate).
func BenchmarkGate(b *testing.B) {
	br := &Broker{streams: map[uint32]*stream{}, users: map[uint32]*user{}}
	s := &stream{id: 3, name: "orders", topics: map[uint32]*topic{}}
	s.topics[5] = &topic{stream: s, id: 5, name: "created"}
	br.streams[3] = s
	br.users[1] = &user{id: 1, name: "sender", status: wire.UserActive, perms: &wire.Permissions{
		Streams: map[uint32]*wire.StreamPermissions{3: {Topics: map[uint32]*wire.TopicPermissions{5: {SendMessages: true}}}}}}
	c := &conn{b: br, bound: true, userID: 1}
	meta := wire.NamedID("orders").AppendTo(nil)
	meta = wire.NamedID("created").AppendTo(meta)
	body := binary.LittleEndian.AppendUint32(nil, uint32(len(meta)))
	body = append(body, meta...)
	r := &request{c: c, h: wire.RequestHeader{Command: wire.CmdSendMessages}, body: body}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := br.gate(r); !ok {
			b.Fatal("denied")
		}
	}
}
