package wire

// Users and permissions (codes 31-37): round trips of every payload, one
// permissions blob built by hand from the documented layout, the two
// "no permissions" forms (the reply's four zero bytes, the four zero
// bytes newer encoders add to create_user) and what the decoders refuse.

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// samplePermissions has flags at every level, two streams (one with two
// topics, one with none) given out of id order.
func samplePermissions() *Permissions {
	return &Permissions{
		Global: GlobalPermissions{ManageServers: true, SendMessages: true},
		Streams: map[uint32]*StreamPermissions{
			9: {SendMessages: true},
			1: {ReadStream: true, Topics: map[uint32]*TopicPermissions{
				5: {ManageTopic: true},
				2: {PollMessages: true},
			}},
		},
	}
}

// samplePermissionsBlob is samplePermissions encoded by hand from the
// layout in users.go.
func samplePermissionsBlob() []byte {
	var b []byte
	b = append(b, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1) // manage_servers .. send_messages
	b = append(b, 1)                            // has_streams
	b = append(b, 1, 0, 0, 0)                   // stream 1
	b = append(b, 0, 1, 0, 0, 0, 0)             // manage_stream, read_stream, manage_topics, read_topics, poll, send
	b = append(b, 1)                            // has_topics
	b = append(b, 2, 0, 0, 0, 0, 0, 1, 0, 1)    // topic 2: poll_messages; has_next_topic
	b = append(b, 5, 0, 0, 0, 1, 0, 0, 0, 0)    // topic 5: manage_topic; no next topic
	b = append(b, 1)                            // has_next_stream
	b = append(b, 9, 0, 0, 0)                   // stream 9
	b = append(b, 0, 0, 0, 0, 0, 1)             // send_messages
	b = append(b, 0)                            // has_topics
	b = append(b, 0)                            // has_next_stream
	return b
}

// permsRoundTrip encodes p, decodes it, requires the same value (nil and
// empty maps alike) and that the decoded value encodes to the same bytes.
func permsRoundTrip(t *testing.T, p *Permissions) []byte {
	t.Helper()
	b := p.AppendTo(nil)
	var got Permissions
	require.NoError(t, Unmarshal(b, &got))
	require.Equal(t, b, got.AppendTo(nil), "encode, decode, encode is byte-identical")
	require.Equal(t, p.Global, got.Global)
	require.Equal(t, len(p.Streams), len(got.Streams))
	for sid, s := range p.Streams {
		g := got.Streams[sid]
		require.NotNil(t, g, "stream %d", sid)
		require.Equal(t, len(s.Topics), len(g.Topics), "stream %d", sid)
		for tid, tp := range s.Topics {
			require.Equal(t, tp, g.Topics[tid], "stream %d topic %d", sid, tid)
		}
		s2, g2 := *s, *g
		s2.Topics, g2.Topics = nil, nil
		require.Equal(t, s2, g2, "stream %d", sid)
	}
	return b
}

func TestPermissionsRoundTrips(t *testing.T) {
	t.Parallel()
	all := AllPermissions()
	b := permsRoundTrip(t, all)
	require.Equal(t, []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, b, "ten global flags, no streams")
	require.Equal(t, make([]byte, 11), permsRoundTrip(t, &Permissions{}), "nothing at all")

	permsRoundTrip(t, &Permissions{Streams: map[uint32]*StreamPermissions{7: {ManageStream: true, PollMessages: true}}})
	permsRoundTrip(t, &Permissions{Streams: map[uint32]*StreamPermissions{
		7: {Topics: map[uint32]*TopicPermissions{0: {ReadTopic: true}}}}})
	permsRoundTrip(t, samplePermissions())

	// Many streams and topics, built in a scrambled order: the encoding is
	// in id order, so it does not depend on the map's iteration.
	many := &Permissions{Global: GlobalPermissions{ReadUsers: true}, Streams: map[uint32]*StreamPermissions{}}
	for _, sid := range []uint32{40, 3, 0xffffffff, 17, 0, 8} {
		s := &StreamPermissions{ReadTopics: sid%2 == 0, ManageTopics: sid%3 == 0}
		if sid%2 == 0 {
			s.Topics = map[uint32]*TopicPermissions{}
			for _, tid := range []uint32{9, 1, 5, 1 << 20} {
				s.Topics[tid] = &TopicPermissions{SendMessages: tid%2 == 1, ReadTopic: tid > 4}
			}
		}
		many.Streams[sid] = s
	}
	enc := permsRoundTrip(t, many)
	for range 20 {
		require.Equal(t, enc, many.AppendTo(nil), "the encoding is deterministic")
	}
	// The first stream id follows the ten flags and has_streams.
	require.Equal(t, uint32(0), binary.LittleEndian.Uint32(enc[11:]))

	// An empty (non-nil) map is written as "none" and reads back as nil.
	empty := &Permissions{Streams: map[uint32]*StreamPermissions{}}
	require.Equal(t, make([]byte, 11), empty.AppendTo(nil))
	var got Permissions
	require.NoError(t, Unmarshal(empty.AppendTo(nil), &got))
	require.Nil(t, got.Streams)
	emptyTopics := &Permissions{Streams: map[uint32]*StreamPermissions{4: {Topics: map[uint32]*TopicPermissions{}}}}
	require.NoError(t, Unmarshal(emptyTopics.AppendTo(nil), &got))
	require.Nil(t, got.Streams[4].Topics)
}

func TestPermissionsBlobLayout(t *testing.T) {
	t.Parallel()
	want := samplePermissionsBlob()
	require.Equal(t, want, samplePermissions().AppendTo(nil))
	var got Permissions
	require.NoError(t, Unmarshal(want, &got))
	require.Equal(t, samplePermissions(), &got)

	// Flags inside the blob are set when non-zero, and written back as 1.
	loose := bytes.Clone(want)
	loose[0], loose[9] = 7, 0xff
	require.NoError(t, Unmarshal(loose, &got))
	require.Equal(t, samplePermissions(), &got)
	require.Equal(t, want, got.AppendTo(nil))

	// The wrapper: [1][len u32][blob] after the user id.
	up := Marshal(&UpdatePermissions{User: NumericID(3), Permissions: samplePermissions()})
	head := []byte{1, 4, 3, 0, 0, 0, 1}
	head = binary.LittleEndian.AppendUint32(head, uint32(len(want)))
	require.Equal(t, append(head, want...), up)
	require.Equal(t, []byte{2, 1, 'u', 0}, Marshal(&UpdatePermissions{User: NamedID("u")}), "nil is a 0 flag")
}

func TestUserPayloadRoundTrips(t *testing.T) {
	t.Parallel()
	name, inactive := "renamed", UserInactive
	roundTrip(t, &UserRef{NumericID(7)})
	roundTrip(t, &UserRef{NamedID("someone")})
	roundTrip(t, &CreateUser{Username: "app", Password: "secret", Status: UserActive})
	roundTrip(t, &CreateUser{Username: "app", Password: "secret", Status: UserInactive, Permissions: samplePermissions()})
	roundTrip(t, &CreateUser{Username: "app", Password: "secret", Status: UserActive, Permissions: &Permissions{}})
	roundTrip(t, &UpdateUser{User: NumericID(1)})
	roundTrip(t, &UpdateUser{User: NumericID(1), Username: &name})
	roundTrip(t, &UpdateUser{User: NamedID("app"), Status: &inactive})
	roundTrip(t, &UpdateUser{User: NamedID("app"), Username: &name, Status: &inactive})
	roundTrip(t, &UpdatePermissions{User: NumericID(1)})
	roundTrip(t, &UpdatePermissions{User: NamedID("app"), Permissions: samplePermissions()})
	roundTrip(t, &ChangePassword{User: NamedID("app"), CurrentPassword: "old-secret", NewPass: "new-secret"})
	info := UserInfo{ID: 3, CreatedAt: 1_700_000_000_000_000, Status: UserActive, Username: "app"}
	roundTrip(t, &info)
	roundTrip(t, &UserList{})
	roundTrip(t, &UserList{{ID: 0, Status: UserActive, Username: "iggy"}, info})
	roundTrip(t, &UserDetails{UserInfo: info})
	roundTrip(t, &UserDetails{UserInfo: info, Permissions: samplePermissions()})
	roundTrip(t, &UserDetails{UserInfo: info, Permissions: AllPermissions()})

	// Values, not only bytes.
	for _, want := range []*UpdateUser{
		{User: NumericID(1)}, {User: NumericID(1), Username: &name}, {User: NumericID(1), Status: &inactive},
	} {
		var got UpdateUser
		require.NoError(t, Unmarshal(Marshal(want), &got))
		require.Equal(t, want, &got)
	}
	var cu CreateUser
	want := &CreateUser{Username: "app", Password: "secret", Status: UserInactive, Permissions: samplePermissions()}
	require.NoError(t, Unmarshal(Marshal(want), &cu))
	require.Equal(t, want, &cu)
	var l UserList
	require.NoError(t, Unmarshal(nil, &l))
	require.Empty(t, l)
}

func TestCreateUserLayout(t *testing.T) {
	t.Parallel()
	b := Marshal(&CreateUser{Username: "app", Password: "pw1", Status: UserInactive})
	require.Equal(t, []byte{3, 'a', 'p', 'p', 3, 'p', 'w', '1', 2, 0}, b, "no length after a 0 permissions flag")

	// Newer encoders write a u32 0 after has_permissions=0: the request
	// decoder takes it as trailing bytes.
	var got CreateUser
	require.NoError(t, DecodeRequest(append(bytes.Clone(b), 0, 0, 0, 0), &got))
	require.Equal(t, CreateUser{Username: "app", Password: "pw1", Status: UserInactive}, got)

	with := Marshal(&CreateUser{Username: "app", Password: "pw1", Status: UserActive, Permissions: samplePermissions()})
	blob := samplePermissionsBlob()
	tail := binary.LittleEndian.AppendUint32([]byte{1, 1}, uint32(len(blob)))
	require.Equal(t, append(append([]byte{3, 'a', 'p', 'p', 3, 'p', 'w', '1'}, tail...), blob...), with)
}

func TestUserDetailsLayout(t *testing.T) {
	t.Parallel()
	info := UserInfo{ID: 5, CreatedAt: 6, Status: UserActive, Username: "app"}
	head := []byte{5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 1, 3, 'a', 'p', 'p'}
	require.Equal(t, head, Marshal(&info))

	none := Marshal(&UserDetails{UserInfo: info})
	require.Equal(t, append(bytes.Clone(head), 0, 0, 0, 0), none, "no permissions: four zero bytes, as upstream")
	var got UserDetails
	require.NoError(t, Unmarshal(none, &got))
	require.Equal(t, UserDetails{UserInfo: info}, got)

	// A one-byte 0 (a reader that writes the bare flag) is read too.
	require.NoError(t, Unmarshal(append(bytes.Clone(head), 0), &got))
	require.Nil(t, got.Permissions)
	require.Error(t, Unmarshal(append(bytes.Clone(head), 0, 0, 0, 0, 0), &got), "a fifth byte is trailing")
	require.Error(t, Unmarshal(head, &got), "the permissions part is missing")

	with := Marshal(&UserDetails{UserInfo: info, Permissions: samplePermissions()})
	blob := samplePermissionsBlob()
	want := binary.LittleEndian.AppendUint32(append(bytes.Clone(head), 1), uint32(len(blob)))
	require.Equal(t, append(want, blob...), with)
	require.NoError(t, Unmarshal(with, &got))
	require.Equal(t, samplePermissions(), got.Permissions)

	// get_users: entries back to back.
	list := UserList{info, {ID: 6, CreatedAt: 7, Status: UserInactive, Username: "b0b"}}
	lb := Marshal(&list)
	require.Equal(t, head, lb[:len(head)])
	var gl UserList
	require.NoError(t, Unmarshal(lb, &gl))
	require.Equal(t, list, gl)
	require.Error(t, Unmarshal(lb[:len(lb)-1], &gl), "a cut entry")
}

func TestUserStatus(t *testing.T) {
	t.Parallel()
	require.True(t, UserActive.Valid())
	require.True(t, UserInactive.Valid())
	require.False(t, UserStatus(0).Valid())
	require.False(t, UserStatus(3).Valid())
	require.Equal(t, "active", UserActive.String())
	require.Equal(t, "inactive", UserInactive.String())
	require.Equal(t, "unknown", UserStatus(3).String())
}

func TestUserPayloadRejections(t *testing.T) {
	t.Parallel()
	cu := Marshal(&CreateUser{Username: "app", Password: "pw1", Status: UserActive})
	statusAt := len(cu) - 2

	bad := bytes.Clone(cu)
	bad[statusAt] = 3
	var c CreateUser
	require.ErrorIs(t, DecodeRequest(bad, &c), ErrMalformed, "status 3")
	bad[statusAt] = 0
	require.ErrorIs(t, DecodeRequest(bad, &c), ErrMalformed, "status 0")

	bad = bytes.Clone(cu)
	bad[len(bad)-1] = 2
	require.ErrorIs(t, DecodeRequest(bad, &c), ErrMalformed, "has_permissions 2")
	require.Error(t, DecodeRequest(cu[:len(cu)-1], &c), "has_permissions missing")

	with := Marshal(&CreateUser{Username: "app", Password: "pw1", Status: UserActive, Permissions: samplePermissions()})
	lenAt := len(cu)
	past := bytes.Clone(with)
	binary.LittleEndian.PutUint32(past[lenAt:], uint32(len(samplePermissionsBlob())+1))
	require.ErrorIs(t, DecodeRequest(past, &c), ErrMalformed, "permissions length past the body")
	binary.LittleEndian.PutUint32(past[lenAt:], 0xffffffff)
	require.ErrorIs(t, DecodeRequest(past, &c), ErrMalformed, "permissions length u32::MAX")
	require.Error(t, DecodeRequest(with[:lenAt+2], &c), "permissions length cut")

	// The blob must fill its length exactly: one more byte inside it is
	// refused even by the lenient request decoder.
	inside := bytes.Clone(with)
	binary.LittleEndian.PutUint32(inside[lenAt:], uint32(len(samplePermissionsBlob())+1))
	inside = append(inside, 0)
	require.ErrorIs(t, DecodeRequest(inside, &c), ErrMalformed, "a blob with trailing bytes inside its length")
	// Short by one inside its length: the blob is cut.
	short := bytes.Clone(with)
	binary.LittleEndian.PutUint32(short[lenAt:], uint32(len(samplePermissionsBlob())-1))
	require.ErrorIs(t, DecodeRequest(short, &c), ErrMalformed, "a blob shorter than its permissions")

	// The same blob rules through update_permissions and get_user.
	var up UpdatePermissions
	upb := Marshal(&UpdatePermissions{User: NumericID(1), Permissions: samplePermissions()})
	binary.LittleEndian.PutUint32(upb[7:], uint32(len(samplePermissionsBlob())+1))
	require.Error(t, DecodeRequest(append(upb, 0), &up))
	var ud UserDetails
	udb := Marshal(&UserDetails{UserInfo: UserInfo{ID: 1, Status: UserActive, Username: "app"}, Permissions: samplePermissions()})
	require.Error(t, Unmarshal(udb[:len(udb)-1], &ud), "get_user blob cut")
	udb[17] = 2
	require.Error(t, Unmarshal(udb, &ud), "get_user has_permissions 2")

	// Duplicate ids.
	var p Permissions
	dupStream := make([]byte, 10)
	dupStream = append(dupStream, 1)
	dupStream = append(dupStream, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1) // stream 4, no topics, next
	dupStream = append(dupStream, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0) // stream 4 again
	require.ErrorIs(t, Unmarshal(dupStream, &p), ErrMalformed, "duplicate stream id")
	ok := make([]byte, 10)
	ok = append(ok, 1)
	ok = append(ok, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1)
	ok = append(ok, 5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0)
	require.NoError(t, Unmarshal(ok, &p), "the same bytes with distinct ids")
	require.Len(t, p.Streams, 2)

	dupTopic := make([]byte, 10)
	dupTopic = append(dupTopic, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	dupTopic = append(dupTopic, 2, 0, 0, 0, 1, 0, 0, 0, 1)
	dupTopic = append(dupTopic, 2, 0, 0, 0, 1, 0, 0, 0, 0)
	dupTopic = append(dupTopic, 0)
	require.ErrorIs(t, Unmarshal(dupTopic, &p), ErrMalformed, "duplicate topic id")
	require.Error(t, Unmarshal(samplePermissionsBlob()[:30], &p), "a cut blob")
	require.Error(t, Unmarshal(append(samplePermissionsBlob(), 0), &p), "a blob with a trailing byte")

	// Status in update_user is checked as in create_user; has_* are booleans.
	var uu UpdateUser
	require.Error(t, DecodeRequest([]byte{1, 4, 1, 0, 0, 0, 0, 1, 3}, &uu), "update_user status 3")
	require.Error(t, DecodeRequest([]byte{1, 4, 1, 0, 0, 0, 2}, &uu), "update_user has_username 2")
	require.Error(t, DecodeRequest([]byte{1, 4, 1, 0, 0, 0, 0, 2, 1}, &uu), "update_user has_status 2")
	require.Error(t, DecodeRequest([]byte{1, 4, 1, 0, 0, 0, 1, 5, 'a'}, &uu), "update_user username past the body")
	var cp ChangePassword
	require.Error(t, DecodeRequest([]byte{1, 4, 1, 0, 0, 0, 3, 'a', 'b', 'c', 4, 'a'}, &cp), "new password past the body")
	var ur UserRef
	require.Error(t, DecodeRequest([]byte{3, 1, 'a'}, &ur), "identifier kind 3")
	var ui UserInfo
	require.Error(t, Unmarshal(append(make([]byte, 13), 0), &ui), "empty username in a reply")
}
