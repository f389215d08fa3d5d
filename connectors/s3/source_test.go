package s3

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
)

// feeder puts numbered NDJSON objects under a prefix, keys in order.
type feeder struct {
	c              *minio.Client
	bucket, prefix string
	mu             sync.Mutex
	objects, lines int
}

// put adds an object of n lines and returns them.
func (f *feeder) put(t testing.TB, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for range n {
		lines = append(lines, fmt.Sprintf(`{"n":%d}`, f.lines))
		f.lines++
	}
	body := strings.Join(lines, "\n") + "\n"
	if f.objects%2 == 1 {
		body = strings.Join(lines, "\r\n\n") // CRLF, blank lines, no final newline
	}
	key := fmt.Sprintf("%s%08d.ndjson", f.prefix, f.objects)
	f.objects++
	_, err := f.c.PutObject(context.Background(), f.bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		t.Errorf("put %s: %v", key, err)
	}
	return lines
}

func sourceValues(t s3test.Target, bucket string, extra map[string]any) map[string]any {
	v := map[string]any{"bucket": bucket, "region": s3test.Region, "endpoint": t.Endpoint,
		"access_key_id": t.AccessKey, "secret_access_key": t.Secret, "prefix": "in/", "poll_interval": "20ms", "batch_size": int64(5)}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	f := &feeder{c: tgt.Client(t), bucket: bucket, prefix: "in/"}
	// An object outside the prefix is never read.
	_, err := f.c.PutObject(context.Background(), bucket, "elsewhere.ndjson", strings.NewReader("{}\n"), 3, minio.PutObjectOptions{})
	require.NoError(t, err)
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(cfg(sourceValues(tgt, bucket, nil)))
			require.NoError(t, err)
			return s
		},
		Add: func(t *testing.T, n int) []string {
			// Several objects per Add: a batch never spans two.
			var out []string
			for n > 0 {
				k := min(n, 7)
				out = append(out, f.put(t, k)...)
				n -= k
			}
			return out
		},
		StableIDs: true,
	})
}

// Whole objects are one message each; after_read deletes or moves an
// object once its batch is acknowledged, and never reads a moved one.
func TestWholeObjectsAndAfterRead(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	c := tgt.Client(t)
	for _, action := range []string{"delete", "move"} {
		t.Run(action, func(t *testing.T) {
			bucket := tgt.Bucket(t)
			f := &feeder{c: c, bucket: bucket, prefix: "in/"}
			f.put(t, 2)
			f.put(t, 1)
			s, err := NewSource(cfg(sourceValues(tgt, bucket, map[string]any{"format": "whole", "after_read": action,
				"prefix": "", "move_prefix": "done/"})))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, s.Open(ctx, nil))
			defer s.Close(ctx)
			for i, want := range []string{"{\"n\":0}\n{\"n\":1}\n", `{"n":2}`} {
				b, err := s.Poll(ctx)
				require.NoError(t, err)
				require.Len(t, b.Messages, 1)
				require.Equal(t, want, string(b.Messages[0].Payload), "object %d", i)
				require.NoError(t, s.(connector.Acker).Ack(ctx, b))
			}
			var left []string
			for _, o := range objects(t, c, bucket) {
				left = append(left, o.Key)
			}
			if action == "delete" {
				require.Empty(t, left)
			} else {
				require.Equal(t, []string{"done/in/00000000.ndjson", "done/in/00000001.ndjson"}, left)
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err = s.Poll(pctx)
			require.ErrorIs(t, err, context.DeadlineExceeded, "nothing more to read: moved objects are not read again")
		})
	}
}

// The source in the runtime: objects put before and after it started
// reach Iggy in key order, line by line.
func TestSourceIntoIggy(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	f := &feeder{c: tgt.Client(t), bucket: bucket, prefix: "logs/"}
	want := f.put(t, 30)
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_s3"
path = "s3"
[[streams]]
stream = "s"
topic = "t"
schema = "json"
linger_time = "0ms"
[plugin_config]
bucket = %q
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "logs/"
format = "ndjson"
poll_interval = "20ms"
`, bucket, tgt.Endpoint, tgt.AccessKey, tgt.Secret)})
	want = append(want, f.put(t, 12)...)
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var got []string
	connectortest.Eventually(t, "42 messages in Iggy", func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, m := range r.Messages {
			got = append(got, string(m.Payload))
		}
		return len(got) >= len(want)
	})
	require.Equal(t, want, got)
}

// An S3 server that is down for a while: the source retries, and every
// line put before, during (on the server's disk, as it comes back) and
// after the outage reaches Iggy.
func TestSourceSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a server of its own")
	}
	t.Parallel()
	srv := s3test.Private(t)
	bucket := srv.Bucket(t)
	f := &feeder{c: srv.Client(t), bucket: bucket, prefix: "in/"}
	want := f.put(t, 5)
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_s3"
path = "s3"
[[streams]]
stream = "s"
topic = "t"
schema = "json"
linger_time = "0ms"
[plugin_config]
bucket = %q
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "in/"
poll_interval = "20ms"
`, bucket, srv.Endpoint, srv.AccessKey, srv.Secret)})
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	inIggy := func() []string {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		if err != nil {
			return nil
		}
		var out []string
		for _, m := range r.Messages {
			out = append(out, string(m.Payload))
		}
		return out
	}
	connectortest.Eventually(t, "5 messages", func() bool { return len(inIggy()) == 5 })
	srv.Halt()
	connectortest.Eventually(t, "the source to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSource) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	want = append(want, f.put(t, 6)...)
	var got []string
	deadline := time.Now().Add(3 * time.Minute) // past the runtime's longest backoff
	for len(got) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("after the outage %d of %d messages arrived", len(got), len(want))
		}
		time.Sleep(50 * time.Millisecond)
		got = inIggy()
	}
	require.Equal(t, want, got, "every line once, in order")
}
