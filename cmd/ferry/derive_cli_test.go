package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// TestDeriveIssueCommand runs the command of issue 17 as a shell user
// types it, `ferry derive create NAME --from STREAM/TOPIC --group-by FIELD
// --agg 'count(*)' --window 1m --to STREAM/TOPIC`, on a running runtime,
// and checks with the CLI: the output topic's changelog holds per
// (user, minute) the count of the input events whose origin timestamp is
// in that minute; a late event is dropped; `ferry derive view NAME KEY`
// answers the open windows of a key and nothing once they closed; derive
// get, list and delete.
func TestDeriveIssueCommand(t *testing.T) {
	t.Parallel()
	live := startLiveRuntime(t, t.TempDir())
	derive := deriveCLI(t, live)
	must := func(args ...string) string {
		t.Helper()
		out, err := derive(args...)
		require.NoError(t, err, "ferry derive %v: %s", args, out)
		return out
	}
	addr := "--address=" + live.rt.IggyAddress()
	iggyCLI := func(args ...string) string {
		t.Helper()
		out, err := ferry(t, "", append(args, addr)...)
		require.NoError(t, err, "ferry %v: %s", args, out)
		return out
	}
	// One input partition: the watermark is the highest event time over
	// all partitions, so events in time order stay in time order.
	iggyCLI("stream", "create", "shop")
	iggyCLI("topic", "create", "shop", "clicks", "1", "none")

	_, err := derive("create", "bad", "--from", "shop/clicks", "--group-by", "user", "--agg", "count(*)", "--window", "a while", "--to", "shop/x")
	require.ErrorContains(t, err, "window")
	out := must("create", "clicks_per_user", "--from", "shop/clicks", "--group-by", "user", "--agg", "count(*)", "--window", "1m",
		"--to", "shop/clicks_per_user")
	require.Contains(t, out, "derived topic clicks_per_user created: count(*) of shop/clicks into shop/clicks_per_user")

	// Three minutes some time ago: events are placed by their origin
	// timestamp, not by when they are sent, so no minute boundary of the
	// clock splits a window here.
	w0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	w1, w2 := w0.Add(time.Minute), w0.Add(2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	type event struct {
		user string
		at   time.Time
	}
	send := func(evs ...event) {
		t.Helper()
		msgs := make([]iggy.Message, len(evs))
		for i, e := range evs {
			msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, `{"user":%q,"n":%d}`, e.user, i), OriginTimestamp: e.at}
		}
		_, err := cl.SendMessages(ctx, iggy.NamedID("shop"), iggy.NamedID("clicks"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	at := func(w time.Time, s int) time.Time { return w.Add(time.Duration(s) * time.Second) }
	// Minute w0: alice 3, bob 2 (the last one at its last millisecond).
	// Minute w1: alice 1, bob 4, carol 2, ".." 1 (a key a URL path
	// cannot hold unescaped).
	send(event{"alice", at(w0, 0)}, event{"bob", at(w0, 5)}, event{"alice", at(w0, 20)}, event{"alice", at(w0, 59)},
		event{"bob", w1.Add(-time.Millisecond)},
		event{"bob", at(w1, 0)}, event{"carol", at(w1, 1)}, event{"bob", at(w1, 10)}, event{"alice", at(w1, 30)},
		event{"bob", at(w1, 40)}, event{"..", at(w1, 45)}, event{"carol", at(w1, 50)}, event{"bob", at(w1, 55)})

	ms := func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z07:00") }
	value := func(user string, w time.Time, count int) string {
		return fmt.Sprintf(`{"key":%q,"window_start":%q,"window_end":%q,"count":%d}`, user, ms(w), ms(w.Add(time.Minute)), count)
	}
	// changelog reads the output topic: per changelog key its latest value,
	// and how many updates each key had.
	changelog := func() (map[string]string, map[string]int) {
		t.Helper()
		var r struct{ Messages []polledMsg }
		out := iggyCLI("message", "poll", "shop", "clicks_per_user", "0", "--first", "--count", "1000", "--json")
		require.NoError(t, json.Unmarshal([]byte(out), &r), "poll output: %s", out)
		last, updates := map[string]string{}, map[string]int{}
		for _, m := range r.Messages {
			require.False(t, m.Deleted, "no deletion marker without --retract: %v", m)
			last[m.Key] = m.Payload
			updates[m.Key]++
		}
		return last, updates
	}
	want := map[string]string{
		"alice@" + ms(w0): value("alice", w0, 3), "bob@" + ms(w0): value("bob", w0, 2),
		"alice@" + ms(w1): value("alice", w1, 1), "bob@" + ms(w1): value("bob", w1, 4), "carol@" + ms(w1): value("carol", w1, 2),
		"..@" + ms(w1): value("..", w1, 1),
	}
	equalJSON := func(want, got map[string]string) bool {
		if len(want) != len(got) {
			return false
		}
		for k, v := range want {
			if !jsonEq(v, got[k]) {
				return false
			}
		}
		return true
	}
	var last map[string]string
	waitFor(t, "the changelog holds the counts per user and minute", func() bool {
		last, _ = changelog()
		return equalJSON(want, last)
	})

	// w1 is open (the watermark is in it), w0 closed: a key's view is its
	// open windows.
	require.True(t, jsonEq(must("view", "clicks_per_user", "bob"), "["+value("bob", w1, 4)+"]"))
	require.True(t, jsonEq(must("view", "clicks_per_user", "carol"), "["+value("carol", w1, 2)+"]"))
	require.True(t, jsonEq(must("view", "clicks_per_user", ".."), "["+value("..", w1, 1)+"]"))
	_, err = derive("view", "clicks_per_user", "dave")
	require.ErrorContains(t, err, "no value")

	// A late event for the closed w0 is dropped; one in w2 closes w1.
	_, before := changelog()
	send(event{"alice", at(w0, 30)}, event{"carol", at(w2, 5)})
	want["carol@"+ms(w2)] = value("carol", w2, 1)
	waitFor(t, "carol counted in w2", func() bool {
		last, _ = changelog()
		return equalJSON(want, last)
	})
	_, after := changelog()
	require.Equal(t, before["alice@"+ms(w0)], after["alice@"+ms(w0)], "the late event did not update its closed window")
	_, err = derive("view", "clicks_per_user", "bob")
	require.ErrorContains(t, err, "no value", "bob's windows are all closed")
	require.True(t, jsonEq(must("view", "clicks_per_user", "carol"), "["+value("carol", w2, 1)+"]"))

	var got deriveView
	require.NoError(t, json.Unmarshal([]byte(must("get", "clicks_per_user", "--json")), &got))
	require.Equal(t, "running", got.Status)
	require.Equal(t, []string{"shop/clicks"}, got.From)
	require.Equal(t, "shop/clicks_per_user", got.To)
	require.Equal(t, "user", got.GroupBy)
	require.Equal(t, "1m", got.Window)
	require.Equal(t, []string{"count(*)"}, got.Aggregates)
	require.Equal(t, uint64(15), got.Consumed, "every input message consumed")
	text := must("get", "clicks_per_user")
	require.Regexp(t, `group by:\s+user`, text)
	require.Regexp(t, `window:\s+1m`, text)
	require.Regexp(t, `clicks_per_user\s+running\s+shop/clicks\s+shop/clicks_per_user\s+count\(\*\)`, must("list"))

	require.Contains(t, must("delete", "clicks_per_user"), "derived topic clicks_per_user deleted")
	require.Contains(t, must("list"), "no derived topics")
	_, err = derive("get", "clicks_per_user")
	require.ErrorContains(t, err, "does not exist")
	_, err = derive("view", "clicks_per_user", "carol")
	require.EqualError(t, err, "derived topic clicks_per_user does not exist (ferry derive list shows them)")
	last, _ = changelog()
	require.True(t, equalJSON(want, last), "the output topic stays after delete")
}
