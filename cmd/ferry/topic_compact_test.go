package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/stretchr/testify/require"
)

// polledMsg is one message of `ferry message poll --json`.
type polledMsg struct {
	Offset  uint64
	Payload string
	Key     string
	Deleted bool
}

// pollTopic reads partition 0 of stream/topic from offset 0 with
// `ferry message poll --json`, polls of 500, to its end.
func pollTopic(t *testing.T, run func(args ...string) string, stream, topic string) []polledMsg {
	t.Helper()
	var all []polledMsg
	for next := uint64(0); ; {
		var r struct{ Messages []polledMsg }
		out := run("message", "poll", stream, topic, "0", "--offset", strconv.FormatUint(next, 10), "--count", "500", "--json")
		require.NoError(t, json.Unmarshal([]byte(out), &r), "poll output: %.200s", out)
		if len(r.Messages) == 0 {
			return all
		}
		for _, m := range r.Messages {
			if len(all) > 0 {
				require.Greater(t, m.Offset, all[len(all)-1].Offset, "offsets ascend")
			}
			all = append(all, m)
		}
		next = all[len(all)-1].Offset + 1
	}
}

func offsetsOf(ms []polledMsg) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Offset
	}
	return out
}

// sentMsg is what the test sent at one offset.
type sentMsg struct {
	key     string // "" for none
	deleted bool
	payload string
}

// compactReference is the offsets a compaction of every sealed segment
// keeps when all of ms is sealed: every keyless message and each key's
// latest, a deletion marker only while markersKept.
func compactReference(ms []sentMsg, markersKept bool) []uint64 {
	last := map[string]int{}
	for i, m := range ms {
		if m.key != "" {
			last[m.key] = i
		}
	}
	var out []uint64
	for i, m := range ms {
		if m.key == "" || (last[m.key] == i && (markersKept || !m.deleted)) {
			out = append(out, uint64(i))
		}
	}
	return out
}

// TestTopicCompactCommands runs `ferry topic create --compact
// --compact-tombstone-retention`, `topic get --json` and `topic update
// --compact[=false] --compact-tombstone-retention` against an embedded
// broker compacting every 20 ms, with keyed messages and deletion markers
// sent by `ferry message send --key [--deleted]`: the compacted topic ends
// with exactly the keyless messages and the latest per key (the marker of
// a deleted key kept for its retention, then gone), each at its offset
// with its payload; a plain topic given the same messages keeps them all.
// Bad flag values are usage errors naming the flag.
func TestTopicCompactCommands(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) { c.CompactionInterval = 20 * time.Millisecond }))
	addr := "--address=" + b.Addr()
	run := func(args ...string) string {
		t.Helper()
		out, err := ferry(t, "", append(args, addr)...)
		require.NoError(t, err, "ferry %v: %s", args, out)
		return out
	}
	fail := func(args ...string) error {
		t.Helper()
		out, err := ferry(t, "", append(args, addr)...)
		require.Error(t, err, "ferry %v: %s", args, out)
		return err
	}
	getJSON := func(topic string) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(run("topic", "get", "kv", topic, "--json")), &m))
		return m
	}
	run("stream", "create", "kv")

	// Bad values, before any topic exists: none is created.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--compact", "--compact-tombstone-retention", "never"}, `--compact-tombstone-retention "never": want a duration`},
		{[]string{"--compact", "--compact-tombstone-retention", "3 fortnights"}, `--compact-tombstone-retention "3 fortnights": want a duration`},
		{[]string{"--compact=maybe"}, `invalid argument "maybe" for "--compact" flag`},
		{[]string{"--compact", "--segment-size", "1KB"}, `--segment-size "1KB": want a multiple of 512 bytes from 1MiB to 1GiB`},
		{[]string{"--compact", "--segment-size", "2GiB"}, `--segment-size "2GiB": want a multiple of 512 bytes`},
		{[]string{"--compact", "--segment-size", "1000001B"}, `--segment-size "1000001B": want a multiple of 512 bytes`},
		{[]string{"--compact", "--segment-size", "large"}, `--segment-size "large"`},
	} {
		err := fail(append([]string{"topic", "create", "kv", "bad", "1", "none"}, c.args...)...)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
	require.NotContains(t, run("topic", "list", "kv"), "bad", "no bad topic was created")

	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("topic", "create", "kv", "table", "1", "none",
		"--compact", "--compact-tombstone-retention", "1h", "--segment-size", "1MiB", "--json")), &created))
	require.Equal(t, true, created["compact"], "create --json: %v", created)
	run("topic", "create", "kv", "plain", "1", "none", "--segment-size", "1MiB")
	got := getJSON("table")
	require.Equal(t, true, got["compact"], "topic get --json: %v", got)
	require.Equal(t, "1h0m0s", got["compact_tombstone_retention"], "topic get --json: %v", got)
	plain := getJSON("plain")
	require.NotContains(t, plain, "compact", "a plain topic: %v", plain)
	require.NotContains(t, plain, "compact_tombstone_retention", "a plain topic: %v", plain)

	// 4 KiB payloads: 1 MiB segments roll about every 250 messages. Five
	// keys get 25 values a round for four rounds, with keyless messages
	// between; k3 ends with a deletion marker, k4 is deleted and then
	// written again. 300 keyless messages (1.2 MiB) after the last keyed
	// one seal its segment, so every keyed message is in a sealed segment.
	pad := strings.Repeat("x", 4<<10)
	var sent []sentMsg
	send := func(key string, deleted bool, payloads ...string) {
		t.Helper()
		args := []string{"message", "send", "kv", "", "--partition", "0"}
		if key != "" {
			args = []string{"message", "send", "kv", "", "--key", key}
		}
		if deleted {
			args = append(args, "--deleted")
		}
		for _, topic := range []string{"table", "plain"} {
			args[3] = topic
			require.Contains(t, run(append(args, payloads...)...), fmt.Sprintf("sent %d message(s)", max(len(payloads), 1)))
		}
		if deleted {
			sent = append(sent, sentMsg{key: key, deleted: true, payload: "null"}) // a marker without MESSAGE
			return
		}
		for _, p := range payloads {
			sent = append(sent, sentMsg{key: key, payload: p})
		}
	}
	numbered := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s.%d %s", prefix, i, pad)
		}
		return out
	}
	// A segment rolls between appends, and one send is one append: the
	// filler goes in sends of 20, about 80 KiB.
	fill := func(prefix string) {
		t.Helper()
		for i := range 15 {
			send("", false, numbered(fmt.Sprintf("%s %d", prefix, i), 20)...)
		}
	}
	for round := range 4 {
		for k := range 5 {
			key := fmt.Sprintf("k%d", k)
			send(key, false, numbered(fmt.Sprintf("%s r%d", key, round), 25)...)
			if round == 1 && k == 4 {
				send(key, true)
			}
		}
		send("", false, numbered(fmt.Sprintf("keyless r%d", round), 5)...)
	}
	send("k3", true)
	fill("filler")

	want := compactReference(sent, true)
	require.Less(t, len(want), len(sent)/2, "the reference drops most messages")
	var compacted []polledMsg
	waitFor(t, "the compacted topic holds only the keyless messages and the latest per key", func() bool {
		compacted = pollTopic(t, run, "kv", "table")
		return slices.Equal(offsetsOf(compacted), want)
	})
	latest := map[string]polledMsg{}
	for _, m := range compacted {
		s := sent[m.Offset]
		require.Equal(t, s.payload, m.Payload, "offset %d keeps its payload", m.Offset)
		require.Equal(t, s.key, m.Key, "offset %d keeps its key", m.Offset)
		require.Equal(t, s.deleted, m.Deleted, "offset %d", m.Offset)
		if m.Key != "" {
			_, twice := latest[m.Key]
			require.False(t, twice, "key %s survives once", m.Key)
			latest[m.Key] = m
		}
	}
	require.Len(t, latest, 5)
	require.True(t, latest["k3"].Deleted, "k3's deletion marker is kept for its retention")
	require.True(t, strings.HasPrefix(latest["k4"].Payload, "k4 r3.24 "), "k4 written again after its deletion: %.20s", latest["k4"].Payload)
	for _, k := range []string{"k0", "k1", "k2"} {
		require.True(t, strings.HasPrefix(latest[k].Payload, k+" r3.24 "), "%s: latest value %.20s", k, latest[k].Payload)
	}
	// The same messages in the plain topic: compaction passes ran (the
	// compacted topic is compacted), the plain topic kept everything.
	all := make([]uint64, len(sent))
	for i := range all {
		all[i] = uint64(i)
	}
	require.Equal(t, all, offsetsOf(pollTopic(t, run, "kv", "plain")), "a plain topic is not compacted")

	// topic update without --compact leaves compaction on and sets the
	// retention: 1s, so k3's marker (older than that by now or soon) goes.
	require.Error(t, fail("topic", "update", "kv", "table", "table", "none", "--compact-tombstone-retention", "soon"))
	require.ErrorContains(t, fail("topic", "update", "kv", "table", "table", "none", "--compact-tombstone-retention", "unlimited"),
		"--compact-tombstone-retention")
	run("topic", "update", "kv", "table", "table", "none", "--compact-tombstone-retention", "1s")
	got = getJSON("table")
	require.Equal(t, true, got["compact"], "update without --compact keeps it: %v", got)
	require.Equal(t, "1s", got["compact_tombstone_retention"], "%v", got)
	// A shorter retention applies at once, with nothing appended since the
	// last pass (a pass is skipped until the oldest deletion marker comes
	// due under the retention in force).
	want = compactReference(sent, false)
	waitFor(t, "k3's deletion marker removed after its retention", func() bool {
		return slices.Equal(offsetsOf(pollTopic(t, run, "kv", "table")), want)
	})

	// --compact=false turns it off; --compact on the plain topic turns it
	// on. New values for k0 and filler go to both: the plain topic, now
	// compacted, keeps the latest per key (markers kept: the broker's
	// 24h); the other, no longer compacted, keeps every new message.
	run("topic", "update", "kv", "table", "table", "none", "--compact=false")
	require.NotContains(t, getJSON("table"), "compact")
	run("topic", "update", "kv", "plain", "plain", "none", "--compact")
	require.Equal(t, true, getJSON("plain")["compact"])
	before := len(sent)
	send("k0", false, numbered("k0 r4", 25)...)
	fill("filler2")
	waitFor(t, "the plain topic compacted once turned on", func() bool {
		return slices.Equal(offsetsOf(pollTopic(t, run, "kv", "plain")), compactReference(sent, true))
	})
	for i := before; i < len(sent); i++ {
		want = append(want, uint64(i))
	}
	require.Equal(t, want, offsetsOf(pollTopic(t, run, "kv", "table")), "a topic with compaction turned off keeps its new messages")
}
