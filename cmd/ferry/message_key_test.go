package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// TestSendKey checks that --key sets the key header as well as picking the
// key's partition, --key-hex sends a binary key, --deleted a deletion
// marker with the payload "null", and poll prints keys and markers.
func TestSendKey(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	run := func(args ...string) string {
		t.Helper()
		out, err := ferry(t, "", append(args, addr)...)
		require.NoError(t, err, "ferry %v", args)
		return out
	}
	run("stream", "create", "keys")
	run("topic", "create", "keys", "t", "3", "none", "1d")
	part := wire.PartitionForKey([]byte("customer-7"), 3)
	require.Contains(t, run("message", "send", "keys", "t", "--key", "customer-7", `{"v":1}`, `{"v":2}`), "sent 2 message(s)")
	require.Contains(t, run("message", "send", "keys", "t", "--key", "customer-7", "--deleted"), "sent 1 message(s)")

	var polled struct {
		Messages []struct {
			Payload string
			Key     string
			Deleted bool
			Headers map[string]string
		}
	}
	p := string(rune('0' + part))
	require.NoError(t, json.Unmarshal([]byte(run("message", "poll", "keys", "t", p, "--json")), &polled))
	require.Len(t, polled.Messages, 3, "every message of the key is in the key's partition %d", part)
	for i, m := range polled.Messages {
		require.Equal(t, "customer-7", m.Key, "message %d", i)
		require.Equal(t, i == 2, m.Deleted, "message %d", i)
	}
	require.Equal(t, iggy.DeletedPayload, polled.Messages[2].Payload)

	text := run("message", "poll", "keys", "t", p)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], "key customer-7  {\"v\":1}")
	require.Contains(t, lines[2], "key customer-7  (deleted)  null")

	// The headers themselves, read with the client: a string key, the
	// bool marker; a binary key is a raw value.
	run("message", "send", "keys", "t", "--key-hex", "00ff10", "bin")
	cl, err := iggy.Dial(t.Context(), b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	bpart := wire.PartitionForKey([]byte{0, 0xff, 0x10}, 3)
	reply, err := cl.PollMessages(t.Context(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
		Stream: iggy.NamedID("keys"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(bpart), Strategy: iggy.First(), Count: 10})
	require.NoError(t, err)
	var found bool
	for _, m := range reply.Messages {
		if string(m.Payload) != "bin" {
			continue
		}
		k, ok := m.Key()
		require.True(t, ok)
		require.Equal(t, header.KindRaw, k.Kind)
		require.Equal(t, []byte{0, 0xff, 0x10}, k.Data)
		_, del := header.Get(m.Headers, iggy.DeletedHeader)
		require.False(t, del)
		found = true
	}
	require.True(t, found, "the binary-keyed message is in partition %d", bpart)
	require.Contains(t, run("message", "poll", "keys", "t", string(rune('0'+bpart))), "key 0x00ff10  bin")
}

func TestSendKeyUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--deleted"}, "needs the key it deletes"},
		{[]string{"--key", "k", "--key-hex", "00"}, "not both"},
		{[]string{"--key-hex", "zz"}, "not hex digits"},
		{[]string{"--key", strings.Repeat("k", 256)}, "256 bytes, at most 255"},
		{[]string{"--key", "k", "--deleted", "a", "b"}, "at most one MESSAGE"},
		{[]string{"--key-hex", "00", "--partition", "1"}, "cannot be used together"},
	} {
		_, err := ferry(t, "", append([]string{"message", "send", "s", "t", "--address=127.0.0.1:1"}, c.args...)...)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}
