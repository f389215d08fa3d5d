package s3

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, Iggy → S3: every message sent
// to Iggy is in exactly one object. A batch uploaded but not committed
// before a kill is uploaded again under the same key (or a longer range
// that replaces it), so no offset is in two objects.
func TestEveryMessageArrivesOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	sink := strings.Replace(upstreamSinkTOML(tgt, bucket), "batch_length = 1000", "batch_length = 20", 1)
	sink = strings.Replace(sink, `file_rotation = "size"`, `file_rotation = "messages"
max_messages_per_file = 7`, 1)
	e := connectortest.NewCrashEnv(t, map[string]string{"s3.toml": sink})
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "application_logs")
	require.NoError(t, err)
	for _, topic := range []string{"api_requests", "errors"} {
		_, err = e.Client.CreateTopic(ctx, iggy.NamedID("application_logs"), topic, 1)
		require.NoError(t, err)
	}
	c := tgt.Client(t)
	var mu sync.Mutex
	sent := 0
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error {
		mu.Lock()
		defer mu.Unlock()
		var msgs []iggy.Message
		for range 5 {
			msgs = append(msgs, iggy.Message{Payload: []byte(fmt.Sprintf(`{"n":%d}`, sent+len(msgs)))})
		}
		if _, err := e.Client.SendMessages(ctx, iggy.NamedID("application_logs"), iggy.NamedID("api_requests"), iggy.ToPartition(0), msgs); err != nil {
			return err
		}
		sent += len(msgs)
		return nil
	})
	final := e.KillLoop(nil, 10, func() (int, int) {
		n := len(records(t, c, bucket))
		mu.Lock()
		defer mu.Unlock()
		return n, sent
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	mu.Lock()
	total := sent
	mu.Unlock()
	var rs []record
	connectortest.Eventually(t, "every message in the bucket", func() bool {
		rs = records(t, c, bucket)
		return len(rs) >= total
	})
	copies := map[int]int{}
	for i, r := range rs {
		require.Equal(t, uint64(i), r.Offset, "offsets in key order, each once")
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(r.Payload, &v))
		copies[v.N]++
	}
	for n := 0; n < total; n++ {
		require.Equal(t, 1, copies[n], "message %d", n)
	}
	t.Logf("%d messages in %d objects, each once, after %d kills", total, len(objects(t, c, bucket)), e.Kills)
}

// Ten kill -9 of the runtime mid-stream, S3 → Iggy: every line of every
// object reaches Iggy; a kill repeats at most the batch in flight (the
// state is saved after the batch is in Iggy).
func TestEveryLineArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const batch = 10
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	f := &feeder{c: tgt.Client(t), bucket: bucket, prefix: "in/"}
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_s3"
path = "s3"
[[streams]]
stream = "bridge"
topic = "lines"
schema = "json"
linger_time = "0ms"
[plugin_config]
bucket = %q
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "in/"
batch_size = %d
poll_interval = "10ms"
`, bucket, tgt.Endpoint, tgt.AccessKey, tgt.Secret, batch)})
	stop := connectortest.Feed(t, 15*time.Millisecond, func(int) error { f.put(t, 8); return nil })
	seen := func() map[int]int {
		out := map[int]int{}
		for _, m := range e.Topic("bridge", "lines") {
			var v struct{ N int }
			if json.Unmarshal(m.Payload, &v) == nil {
				out[v.N]++
			}
		}
		return out
	}
	final := e.KillLoop(nil, 10, func() (int, int) {
		n := len(seen())
		f.mu.Lock()
		defer f.mu.Unlock()
		return n, f.lines
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := f.lines
	var got map[int]int
	connectortest.Eventually(t, "every line in Iggy", func() bool { got = seen(); return len(got) >= total })
	copies := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, got[n], "line %d was lost", n)
		copies += got[n]
	}
	t.Logf("%d lines, %d in Iggy (%d repeated by %d kills)", total, copies, copies-total, e.Kills)
	require.LessOrEqual(t, copies-total, e.Kills*batch, "more repeats than a batch per kill")
}
