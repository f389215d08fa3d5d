package wire

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// The fuzz targets feed arbitrary bytes to every decoder. Each must return
// an error or a value, never panic; where a value decodes, re-encoding and
// decoding again must give the same bytes.

func seedFrames(f *testing.F) {
	h := RequestHeader{Size: HeaderSize + 2, Client: U128{1, 0}, Operation: OpNonReplicated, Command: CmdPing}
	b := make([]byte, HeaderSize)
	h.Put(b)
	f.Add(append(b, 0, 0))
	f.Add(b[:100])
	r := ReplyHeader{Size: HeaderSize, Request: 1, Operation: OpCreateStream}
	r.Put(b)
	f.Add(append([]byte(nil), b...))
}

func FuzzReadFrame(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		frame, err := ReadFrame(bytes.NewReader(b), nil, 1<<20)
		for name, read := range map[string]func(io.Reader, []byte, int) ([]byte, error){"sized": ReadFrameSized, "fresh": ReadFrameFresh} {
			other, oerr := read(bytes.NewReader(b), nil, 1<<20)
			if (err == nil) != (oerr == nil) || !bytes.Equal(frame, other) {
				t.Fatalf("ReadFrame %q, %v; %s %q, %v", frame, err, name, other, oerr)
			}
		}
		if err != nil {
			return
		}
		switch Kind(frame) {
		case FrameRequest:
			h, err := DecodeRequestHeader(frame)
			if err == nil {
				_ = h.Validate()
			}
		case FrameReply:
			_, _ = DecodeReplyHeader(frame)
		case FrameEviction:
			_, _ = DecodeEviction(frame)
		}
	})
}

func decoders() map[string]func() Decodable {
	return map[string]func() Decodable{
		"stream_ref": func() Decodable { return &StreamRef{} }, "topic_ref": func() Decodable { return &TopicRef{} },
		"group_ref": func() Decodable { return &GroupRef{} }, "create_stream": func() Decodable { return &CreateStream{} },
		"update_stream": func() Decodable { return &UpdateStream{} }, "create_topic": func() Decodable { return &CreateTopic{} },
		"update_topic": func() Decodable { return &UpdateTopic{} }, "partitions": func() Decodable { return &PartitionsChange{} },
		"delete_segments": func() Decodable { return &DeleteSegments{} }, "create_group": func() Decodable { return &CreateConsumerGroup{} },
		"poll": func() Decodable { return &PollMessages{} }, "send": func() Decodable { return &SendMessages{} },
		"offset_ref": func() Decodable { return &ConsumerOffsetRef{} }, "store_offset": func() Decodable { return &StoreConsumerOffset{} },
		"delete_offset": func() Decodable { return &DeleteConsumerOffset{} }, "describe": func() Decodable { return &DescribeOptions{} },
		"create_pat": func() Decodable { return &CreatePAT{} }, "snapshot": func() Decodable { return &GetSnapshot{} },
		"register": func() Decodable { return &Register{} }, "register_pat": func() Decodable { return &RegisterPAT{} },
		"get_client": func() Decodable { return &GetClient{} }, "delete_pat": func() Decodable { return &DeletePAT{} },
		"user_ref": func() Decodable { return &UserRef{} }, "create_user": func() Decodable { return &CreateUser{} },
		"update_user": func() Decodable { return &UpdateUser{} }, "update_permissions": func() Decodable { return &UpdatePermissions{} },
		"change_password": func() Decodable { return &ChangePassword{} },
	}
}

func replyDecoders() map[string]func() Decodable {
	return map[string]func() Decodable{
		"register_reply": func() Decodable { return &RegisterReply{} }, "stream": func() Decodable { return &StreamDetails{} },
		"streams": func() Decodable { return &StreamList{} }, "topic": func() Decodable { return &TopicDetails{} },
		"topics": func() Decodable { return &TopicList{} }, "group": func() Decodable { return &GroupDetails{} },
		"groups": func() Decodable { return &GroupList{} }, "sync": func() Decodable { return &SyncGroupReply{} },
		"offset": func() Decodable { return &ConsumerOffsetInfo{} }, "send_reply": func() Decodable { return &SendReply{} },
		"poll_reply": func() Decodable { return &PollReply{} }, "cluster": func() Decodable { return &ClusterMetadata{} },
		"client": func() Decodable { return &ClientInfo{} }, "clients": func() Decodable { return &ClientList{} },
		"pat": func() Decodable { return &CreatePATReply{} }, "pats": func() Decodable { return &PATList{} },
		"options": func() Decodable { return &DescribeOptionsReply{} }, "stats": func() Decodable { return &Stats{} },
		"user": func() Decodable { return &UserDetails{} }, "users": func() Decodable { return &UserList{} },
		"permissions": func() Decodable { return &Permissions{} },
	}
}

// fuzzPayloads decodes every input with every decoder of table; what
// decodes must re-encode to bytes that decode again.
func fuzzPayloads(f *testing.F, table map[string]func() Decodable, decode func([]byte, Decodable) error, seeds [][]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, mk := range table {
			v := mk()
			if decode(b, v) != nil {
				continue
			}
			enc, ok := v.(Encodable)
			if !ok {
				continue
			}
			again := mk()
			if err := decode(enc.AppendTo(nil), again); err != nil {
				t.Fatalf("%s: decoded, re-encoded, then failed: %v", name, err)
			}
		}
	})
}

func FuzzRequestPayloads(f *testing.F) {
	msgs := testMessages(2, 1)
	send, _ := AppendSendMessages(nil, NumericID(1), NamedID("t"), Balanced(), msgs)
	fuzzPayloads(f, decoders(), DecodeRequest, [][]byte{
		Marshal(&CreateTopic{Stream: NumericID(1), PartitionsCount: 2, Name: "t"}),
		Marshal(&PollMessages{Consumer{ConsumerSingle, NumericID(0)}, NumericID(1), NumericID(2), Partition(0), First(), 10, false}),
		Marshal(&Register{ProtocolVersion: ProtocolVersion, Username: "iggy", Password: "iggy"}),
		send,
	})
}

func FuzzReplyPayloads(f *testing.F) {
	batch, _ := AppendBatch(nil, testMessages(2, 1))
	explicit, derived := (&TopicOptions{}).Blocks()
	fuzzPayloads(f, replyDecoders(), Unmarshal, [][]byte{
		append(AppendPollReplyHeader(nil, 0, 1, 2), batch...),
		Marshal(&TopicDetails{TopicHeader{Name: "t", Explicit: explicit, Derived: derived}, []PartitionInfo{{ID: 1}}}),
		Marshal(&ClusterMetadata{"c", []ClusterNode{{Name: "n", IP: "127.0.0.1"}}}),
		Marshal(&Stats{Hostname: "h"}),
	})
}

func FuzzBatch(f *testing.F) {
	good, _ := AppendBatch(nil, testMessages(3, 2))
	f.Add(good)
	f.Add(good[:BatchHeaderSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		var c BatchChecker
		_, verr := c.Validate(b)
		if _, err := c.ValidateSend(b); err == nil {
			if verr != nil {
				t.Fatalf("ValidateSend accepts a batch Validate refuses: %v", verr)
			}
			c.Stamp(b, 1, 2, 3)
			if _, err := c.ValidateSend(b); err != nil {
				t.Fatalf("stamped batch no longer validates: %v", err)
			}
			msgs, err := AppendRecordMessages(nil, b)
			if err != nil {
				t.Fatalf("valid batch does not decode: %v", err)
			}
			if _, err := AppendSlicedRecord(nil, b, 0, uint32(len(msgs))); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = AppendRecordMessages(nil, b)
		_, _ = RecordChecksum(b)
		_, _ = AppendSlicedRecord(nil, b, 1, 1)
	})
}

func FuzzTLV(f *testing.F) {
	f.Add(AppendTLV(nil, []Entry{Header("a", StringValue("b"))}))
	f.Add([]byte{2, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseTLV(b)
		if (err == nil) != (CheckTLV(b) == nil) {
			t.Fatalf("ParseTLV and CheckTLV disagree: %v", err)
		}
		if err == nil {
			if !bytes.Equal(AppendTLV(nil, e), b) {
				t.Fatal("TLV does not re-encode to the same bytes")
			}
			for _, x := range e {
				_ = x.Value.String()
			}
		}
		if e, err := ParseOptionsBlock(b); err == nil {
			_, _ = ResolveTopicOptions(DefaultTopicOptions(), e, 3, false)
		}
		_, _, _ = SplitResult(b)
		_, _, _ = DecodeRegisterBody(b)
	})
}

// fuzzValue decodes b as a T; what decodes must re-encode to bytes that
// decode to the same value, and those bytes must be stable (a second
// encode is byte-identical: the first one normalizes loose flags and the
// "no permissions" tail).
func fuzzValue[T any, P interface {
	*T
	Encodable
	Decodable
}](t *testing.T, decode func([]byte, Decodable) error, b []byte) {
	var v T
	if decode(b, P(&v)) != nil {
		return
	}
	enc := P(&v).AppendTo(nil)
	var again T
	if err := decode(enc, P(&again)); err != nil {
		t.Fatalf("%T: decoded, re-encoded, then failed: %v", v, err)
	}
	if !reflect.DeepEqual(v, again) {
		t.Fatalf("%T: decoded %+v, re-encoded and decoded %+v", v, v, again)
	}
	if enc2 := P(&again).AppendTo(nil); !bytes.Equal(enc, enc2) {
		t.Fatalf("%T: re-encoding is not stable: %x then %x", v, enc, enc2)
	}
}

func userSeeds(f *testing.F, seeds ...Encodable) {
	for _, s := range seeds {
		f.Add(Marshal(s))
	}
}

func fuzzPermissionsSeed() *Permissions {
	return &Permissions{Global: GlobalPermissions{ReadStreams: true}, Streams: map[uint32]*StreamPermissions{
		1: {PollMessages: true, Topics: map[uint32]*TopicPermissions{2: {SendMessages: true}, 3: {ReadTopic: true}}},
		4: {ManageStream: true},
	}}
}

func FuzzPermissions(f *testing.F) {
	userSeeds(f, fuzzPermissionsSeed(), AllPermissions(), &Permissions{})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[Permissions](t, Unmarshal, b) })
}

func FuzzCreateUser(f *testing.F) {
	userSeeds(f, &CreateUser{Username: "app", Password: "secret", Status: UserActive},
		&CreateUser{Username: "app", Password: "secret", Status: UserInactive, Permissions: fuzzPermissionsSeed()})
	f.Add(append(Marshal(&CreateUser{Username: "app", Password: "secret", Status: UserActive}), 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[CreateUser](t, DecodeRequest, b) })
}

func FuzzUpdateUser(f *testing.F) {
	name, st := "renamed", UserInactive
	userSeeds(f, &UpdateUser{User: NumericID(1), Username: &name, Status: &st}, &UpdateUser{User: NamedID("app")})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[UpdateUser](t, DecodeRequest, b) })
}

func FuzzUpdatePermissions(f *testing.F) {
	userSeeds(f, &UpdatePermissions{User: NumericID(1), Permissions: fuzzPermissionsSeed()}, &UpdatePermissions{User: NamedID("app")})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[UpdatePermissions](t, DecodeRequest, b) })
}

func FuzzChangePassword(f *testing.F) {
	userSeeds(f, &ChangePassword{User: NamedID("app"), CurrentPassword: "old-secret", NewPass: "new-secret"})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[ChangePassword](t, DecodeRequest, b) })
}

func FuzzUserDetails(f *testing.F) {
	info := UserInfo{ID: 1, CreatedAt: 2, Status: UserActive, Username: "app"}
	userSeeds(f, &UserDetails{UserInfo: info}, &UserDetails{UserInfo: info, Permissions: fuzzPermissionsSeed()})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[UserDetails](t, Unmarshal, b) })
}

func FuzzUserList(f *testing.F) {
	userSeeds(f, &UserList{{ID: 0, Status: UserActive, Username: "iggy"}, {ID: 1, CreatedAt: 2, Status: UserInactive, Username: "app"}})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzValue[UserList](t, Unmarshal, b) })
}
