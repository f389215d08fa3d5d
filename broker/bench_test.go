package broker_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
)

// BenchmarkSend measures the broker's send path: one connection sends
// batches of 1000 messages with 100-byte payloads to one partition, in
// lockstep (one request in flight, as the Go SDK does). The topic is purged
// every 500 batches, off the clock, to bound memory and disk use.
func BenchmarkSend(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []brokertest.Option
	}{{"memory", []brokertest.Option{brokertest.InMemory()}}, {"file", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			br := brokertest.Start(b, mode.opts...)
			c := login(b, br)
			sid, tid := setup(b, c, 1)
			frame, n := sendFrame(b, c, sid, tid, 0)
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%500 == 0 {
					b.StopTimer()
					ok(b, do(b, c, wire.CmdPurgeTopic, &wire.TopicRef{Stream: sid, Topic: tid}))
					b.StartTimer()
				}
				mustSend(b, c, frame)
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkSendParallel sends from several connections, each to its own
// partition, to show that partitions do not contend.
func BenchmarkSendParallel(b *testing.B) {
	br := brokertest.Start(b, brokertest.InMemory())
	admin := login(b, br)
	const parts = 4
	sid, tid := setup(b, admin, parts)
	var next atomic.Uint32
	var total atomic.Int64
	b.SetBytes(int64(len(mustFrame(b, admin, sid, tid))))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := rawclient.Dial(b.Context(), br.Addr())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		if _, err := c.Login("iggy", "iggy"); err != nil {
			b.Error(err)
			return
		}
		frame, n := sendFrame(b, c, sid, tid, next.Add(1)%parts)
		for i := 0; pb.Next(); i++ {
			mustSend(b, c, frame)
			total.Add(int64(n))
		}
	})
	b.ReportMetric(float64(total.Load())/b.Elapsed().Seconds(), "msgs/s")
}

func mustFrame(b *testing.B, c *rawclient.Client, sid, tid wire.Identifier) []byte {
	f, _ := sendFrame(b, c, sid, tid, 0)
	return f
}

// sendFrame builds one send_messages request frame of 1000 messages of
// 100 bytes for partition part. Partition ops do not consume request ids,
// so the same frame can be sent again and again.
func sendFrame(b *testing.B, c *rawclient.Client, sid, tid wire.Identifier, part uint32) ([]byte, int) {
	const n = 1000
	msgs := make([]wire.Message, n)
	payload := []byte(strings.Repeat("p", 100))
	for i := range msgs {
		msgs[i] = wire.Message{ID: [16]byte{byte(i), byte(i >> 8), 1}, OriginTimestamp: 1_700_000_000_000_000, Payload: payload}
	}
	body, err := wire.AppendSendMessages(nil, sid, tid, wire.ToPartition(part), msgs)
	if err != nil {
		b.Fatal(err)
	}
	h := c.Header(wire.CmdSendMessages)
	h.Size = uint32(wire.HeaderSize + len(body))
	frame := make([]byte, wire.HeaderSize, int(h.Size))
	h.Put(frame)
	return append(frame, body...), n
}

func mustSend(b *testing.B, c *rawclient.Client, frame []byte) {
	if err := c.WriteRaw(frame); err != nil {
		b.Fatal(err)
	}
	rep, err := c.Read()
	if err == nil && (rep.Eviction != nil || rep.Status() != 0 || len(rep.Body) != 24) {
		err = fmt.Errorf("send refused: %+v", rep)
	}
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLogin measures a password login on a new connection after the
// password verified once (the verified-passwords cache skips argon2id;
// BenchmarkArgon2id has the cost of a first or failed login).
func BenchmarkLogin(b *testing.B) {
	br := brokertest.Start(b, brokertest.InMemory())
	for i := 0; i < b.N; i++ {
		c := dial(b, br)
		if _, err := c.Login("iggy", "iggy"); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkSendAsLimitedUser is BenchmarkSend's memory case for a user
// whose only right is send_messages on the topic: the permission gate
// (decode the ids, resolve them, check) runs on every batch.
func BenchmarkSendAsLimitedUser(b *testing.B) {
	br := brokertest.Start(b, brokertest.InMemory())
	root := login(b, br)
	sid, tid := setup(b, root, 1)
	st := decodeAs[wire.StreamDetails](b, ok(b, do(b, root, wire.CmdGetStream, &wire.StreamRef{Stream: sid})))
	perms := &wire.Permissions{Streams: map[uint32]*wire.StreamPermissions{st.ID: {
		Topics: map[uint32]*wire.TopicPermissions{st.Topics[0].ID: {SendMessages: true}}}}}
	ok(b, do(b, root, wire.CmdCreateUser, &wire.CreateUser{Username: "sender", Password: "secret", Status: wire.UserActive, Permissions: perms}))
	c := dial(b, br)
	if _, err := c.Login("sender", "secret"); err != nil {
		b.Fatal(err)
	}
	frame, n := sendFrame(b, c, sid, tid, 0)
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%500 == 499 {
			b.StopTimer()
			ok(b, do(b, root, wire.CmdPurgeTopic, &wire.TopicRef{Stream: sid, Topic: tid}))
			b.StartTimer()
		}
		mustSend(b, c, frame)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
