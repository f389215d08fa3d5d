package wire

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeRequestIgnoresTrailingBytes: every fixed-shape request body
// decodes to the same value with bytes appended (upstream's decode_from),
// while Unmarshal, used for replies, still refuses them.
func TestDecodeRequestIgnoresTrailingBytes(t *testing.T) {
	t.Parallel()
	cons := Consumer{ConsumerSingle, NamedID("c")}
	ref := ConsumerOffsetRef{cons, NumericID(1), NamedID("t"), Partition(2)}
	perms := &Permissions{Global: GlobalPermissions{ReadUsers: true},
		Streams: map[uint32]*StreamPermissions{1: {Topics: map[uint32]*TopicPermissions{2: {PollMessages: true}}}}}
	newName, inactive := "renamed", UserInactive
	cases := []Encodable{
		&StreamRef{NamedID("s")},
		&TopicRef{NumericID(1), NamedID("t")},
		&GroupRef{NumericID(1), NumericID(2), NamedID("g")},
		&PartitionsChange{NumericID(1), NumericID(2), 3},
		&DeleteSegments{NumericID(1), NumericID(2), 3, 4},
		&CreateConsumerGroup{NumericID(1), NumericID(2), "g"},
		&PollMessages{cons, NumericID(1), NumericID(2), Partition(0), First(), 10, true},
		&ref,
		&StoreConsumerOffset{ref, 7, AckQuorum},
		&DeleteConsumerOffset{ref, AckNone},
		&DescribeOptions{ScopeTopic},
		&GetClient{9},
		&CreatePAT{"tok", 60},
		&DeletePAT{"tok"},
		&GetSnapshot{1, []uint8{1, 3}},
		&UserRef{NamedID("app")},
		&UserRef{NumericID(3)},
		&CreateUser{"app", "secret", UserActive, nil},
		&CreateUser{"app", "secret", UserInactive, perms},
		&UpdateUser{User: NumericID(3), Username: &newName, Status: &inactive},
		&UpdateUser{User: NamedID("app")},
		&UpdatePermissions{NamedID("app"), perms},
		&UpdatePermissions{NumericID(3), nil},
		&ChangePassword{NamedID("app"), "old-secret", "new-secret"},
	}
	for i, want := range cases {
		t.Run(fmt.Sprintf("%d_%T", i, want), func(t *testing.T) {
			t.Parallel()
			body := append(want.AppendTo(nil), 0xde, 0xad, 0xbe, 0xef)
			got := reflect.New(reflect.TypeOf(want).Elem()).Interface().(Decodable)
			require.NoError(t, DecodeRequest(body, got))
			require.Equal(t, want, got)
			strict := reflect.New(reflect.TypeOf(want).Elem()).Interface().(Decodable)
			require.Error(t, Unmarshal(body, strict), "Unmarshal stays strict")
		})
	}
}

// TestDecodeRequestStillRejects: what upstream's decoders refuse stays
// refused: a field that runs past the body, a bad identifier kind or
// numeric length, an empty name.
func TestDecodeRequestStillRejects(t *testing.T) {
	t.Parallel()
	for name, body := range map[string][]byte{
		"empty body":           {},
		"name past the body":   {2, 10, 's', 's'},
		"identifier kind 3":    {3, 1, 's', 1, 4, 0, 0, 0, 0},
		"numeric length 3":     {1, 3, 0, 0, 0, 1, 4, 0, 0, 0, 0},
		"empty name":           {2, 0, 1, 4, 0, 0, 0, 0},
		"second id cut short":  {1, 4, 0, 0, 0, 0, 1, 4, 0},
		"invalid utf-8 stream": {2, 1, 0xff, 1, 4, 0, 0, 0, 0},
	} {
		var r TopicRef
		require.Error(t, DecodeRequest(body, &r), name)
	}
	var p PartitionsChange
	require.Error(t, DecodeRequest(Marshal(&TopicRef{NumericID(1), NumericID(2)}), &p), "count missing")
	var g GetSnapshot
	require.Error(t, DecodeRequest([]byte{1, 3, 1}, &g), "types count past the body")
}

// TestDecodeRequestRestConsumers: fields that run to the end of the body
// take the trailing bytes, as upstream's options block and batch do, so
// junk there is judged by the options or batch checks, not dropped.
func TestDecodeRequestRestConsumers(t *testing.T) {
	t.Parallel()
	junk := []byte{0xde, 0xad, 0xbe, 0xef}
	var cs CreateStream
	require.NoError(t, DecodeRequest(append(Marshal(&CreateStream{Name: "s"}), junk...), &cs))
	require.Equal(t, junk, cs.Options)
	_, err := ParseOptionsBlock(cs.Options)
	require.Error(t, err, "junk is not an options block")

	send, err := AppendSendMessages(nil, NumericID(1), NumericID(2), Balanced(), testMessages(2, 1))
	require.NoError(t, err)
	var sm SendMessages
	require.NoError(t, DecodeRequest(append(send, junk...), &sm))
	_, err = (&BatchChecker{}).ValidateSend(sm.Batch)
	require.Error(t, err, "a batch followed by junk fails the batch checks")
}
