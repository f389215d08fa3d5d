package wire

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy/header"
)

func TestResolveTopicOptions(t *testing.T) {
	entries := []Entry{
		TopicOption(OptSegmentSize, Uint64Value(1048576)),
		TopicOption(OptEnforceFsync, StringValue("true")),
		TopicOption(OptMessagesRequiredToSave, Uint32Value(7)),
		TopicOption(OptMessageExpiry, StringValue("1d")),
	}
	o, err := ResolveTopicOptions(DefaultTopicOptions(), entries, 1, false)
	require.NoError(t, err)
	require.True(t, o.EnforceFsync)
	require.Equal(t, uint64(1<<20), o.SegmentSize)
	require.Equal(t, uint64(24*time.Hour/time.Microsecond), o.MessageExpiry)
	explicit, derived := o.Blocks()
	require.Len(t, explicit, 4)
	require.Len(t, derived, 4)
	v, _ := Lookup(explicit, OptEnforceFsync)
	require.Equal(t, BoolValue(true), v, "string true is re-encoded as bool")
	v, _ = Lookup(derived, OptMaxTopicSize)
	require.Equal(t, Uint64Value(Unlimited), v)

	// Zero sentinels stay derived.
	o, err = ResolveTopicOptions(DefaultTopicOptions(), []Entry{TopicOption(OptSegmentSize, Uint64Value(0))}, 1, false)
	require.NoError(t, err)
	require.Empty(t, o.Explicit)

	bad := []struct {
		e    Entry
		want error
	}{
		{TopicOption("not_a_real_option", StringValue("x")), ErrUnsupportedOptionKey},
		{TopicOption(OptMessagesRequiredToSave, Uint32Value(0)), ErrInvalidOptionValue},
		{TopicOption(OptSegmentSize, Uint64Value(1048577)), ErrInvalidOptionValue},
		{TopicOption(OptCompression, StringValue("zstd")), ErrInvalidOptionValue},
		{TopicOption(OptEnforceFsync, Value{Kind: KindBool, Data: []byte{2}}), ErrInvalidOptionValue},
		{TopicOption(OptMaxTopicSize, Uint64Value(1000)), ErrInvalidTopicSize},
	}
	for _, c := range bad {
		_, err := ResolveTopicOptions(DefaultTopicOptions(), []Entry{c.e}, 1, false)
		require.ErrorIs(t, err, c.want, "%s", c.e.Key.String())
	}
	_, err = ResolveTopicOptions(DefaultTopicOptions(), []Entry{TopicOption(OptSegmentSize, Uint64Value(1<<20))}, 1, true)
	require.ErrorIs(t, err, ErrUnsupportedOptionKey, "segment_size cannot be updated")
}

func TestParseOptionsBlock(t *testing.T) {
	dup := AppendTLV(nil, []Entry{TopicOption("a", StringValue("1")), TopicOption("a", StringValue("2"))})
	_, err := ParseOptionsBlock(dup)
	require.ErrorIs(t, err, ErrInvalidCommand)
	raw := AppendTLV(nil, []Entry{{Key: header.BinaryKey([]byte("a")), Value: StringValue("1")}})
	_, err = ParseOptionsBlock(raw)
	require.ErrorIs(t, err, ErrInvalidCommand)
	_, err = ParseOptionsBlock(make([]byte, MaxOptionsSize+1))
	require.ErrorIs(t, err, ErrOptionsBlockTooLarge)
	e, err := ParseOptionsBlock(nil)
	require.NoError(t, err)
	require.Empty(t, e)
}
