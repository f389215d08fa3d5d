package s3

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { s3test.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "s3", Plugin: connector.PluginConfig{Source: "s3.toml", Values: values}}
}

// sinkValues are the settings of a sink writing to bucket on target.
func sinkValues(t s3test.Target, bucket string, extra map[string]any) map[string]any {
	v := map[string]any{"bucket": bucket, "region": s3test.Region, "endpoint": t.Endpoint,
		"access_key_id": t.AccessKey, "secret_access_key": t.Secret, "retry_delay": "10ms"}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

func newSink(t testing.TB, values map[string]any) *Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background()))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Sink)
}

// object is one object of a bucket.
type object struct {
	Key  string
	Body []byte
	ETag string
}

// objects returns a bucket's objects in key order.
func objects(t testing.TB, c *minio.Client, bucket string) []object {
	t.Helper()
	ctx := context.Background()
	var out []object
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, o.Err)
		r, err := c.GetObject(ctx, bucket, o.Key, minio.GetObjectOptions{})
		require.NoError(t, err)
		body, err := io.ReadAll(r)
		r.Close()
		require.NoError(t, err)
		out = append(out, object{Key: o.Key, Body: body, ETag: o.ETag})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// record is a JSON record as the sink writes it.
type record struct {
	Offset      uint64            `json:"offset"`
	Timestamp   string            `json:"timestamp"`
	Stream      string            `json:"stream"`
	Topic       string            `json:"topic"`
	PartitionID uint32            `json:"partition_id"`
	Headers     map[string]string `json:"headers"`
	Payload     json.RawMessage   `json:"payload"`
}

// records parses every json_lines object of a bucket, in key order.
func records(t testing.TB, c *minio.Client, bucket string) []record {
	t.Helper()
	var out []record
	for _, o := range objects(t, c, bucket) {
		for _, line := range strings.Split(strings.TrimSuffix(string(o.Body), "\n"), "\n") {
			if line == "" {
				continue
			}
			var r record
			require.NoError(t, json.Unmarshal([]byte(line), &r), "object %s line %q", o.Key, line)
			out = append(out, r)
		}
	}
	return out
}

func payloadsOf(rs []record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Payload)
	}
	return out
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	c := tgt.Client(t)
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := NewSink(cfg(sinkValues(tgt, bucket, nil)))
			require.NoError(t, err)
			return s
		},
		Read: func(t *testing.T) []string { return payloadsOf(records(t, c, bucket)) },
		// An object's key is its offset range: a batch written again
		// overwrites the same object.
		Idempotent: true,
	})
}

func batchOf(stream, topic string, partition uint32, from uint64, payloads ...string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: stream, Topic: topic, Partition: partition, Schema: connector.SchemaJSON}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p), Offset: from + uint64(i),
			Timestamp: time.Date(2026, 3, 16, 14, 2, 31, 0, time.UTC)})
	}
	return b
}

func numbered(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf(`{"n":%d}`, i))
	}
	return out
}

func keys(os []object) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Key)
	}
	return out
}

// Keys follow upstream's layout: prefix, the template, the offset range;
// rotation by message count cuts a batch into objects; upstream's record
// shape with metadata and headers.
func TestKeysRotationAndRecords(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	s := newSink(t, sinkValues(tgt, bucket, map[string]any{"prefix": "/iggy/raw/", "file_rotation": "messages",
		"max_messages_per_file": int64(4), "include_headers": true}))
	b := batchOf("application_logs", "api_requests", 1, 40, numbered(0, 10)...)
	b.Messages[2].SetHeader("content-type", connector.StringHeader("", "application/json").Value)
	require.NoError(t, s.Consume(context.Background(), b))
	c := tgt.Client(t)
	require.Equal(t, []string{
		"iggy/raw/application_logs/api_requests/2026-03-16/14/000040-000043.jsonl",
		"iggy/raw/application_logs/api_requests/2026-03-16/14/000044-000047.jsonl",
		"iggy/raw/application_logs/api_requests/2026-03-16/14/000048-000049.jsonl",
	}, keys(objects(t, c, bucket)))
	rs := records(t, c, bucket)
	require.Equal(t, numbered(0, 10), payloadsOf(rs))
	require.Equal(t, record{Offset: 42, Timestamp: "2026-03-16T14:02:31Z", Stream: "application_logs", Topic: "api_requests",
		PartitionID: 1, Headers: map[string]string{"content-type": "application/json"}, Payload: json.RawMessage(`{"n":2}`)}, rs[2])
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	c := tgt.Client(t)
	for _, tc := range []struct{ format, ext, want string }{
		{"json_array", "json", `[{"payload":{"a":1}},{"payload":"dGV4dA=="}]`},
		{"raw", "bin", "{\"a\":\n 1}\ntext\n"}, // payloads as they are, one per line
		{"jsonl", "jsonl", "{\"payload\":{\"a\":1}}\n{\"payload\":\"dGV4dA==\"}\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			bucket := tgt.Bucket(t)
			s := newSink(t, sinkValues(tgt, bucket, map[string]any{"output_format": tc.format, "include_metadata": false,
				"path_template": "{topic}"}))
			b := batchOf("s", "t", 0, 0, "{\"a\":\n 1}", "text")
			b.Schema = connector.SchemaRaw
			require.NoError(t, s.Consume(context.Background(), b))
			os := objects(t, c, bucket)
			require.Len(t, os, 1)
			require.Equal(t, "t/000000-000001."+tc.ext, os[0].Key)
			require.Equal(t, tc.want, string(os[0].Body))
		})
	}
}

// An object larger than part_size is sent as a multipart upload: its
// ETag is S3's multipart "md5-N".
func TestLargeObjectIsAMultipartUpload(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	s := newSink(t, sinkValues(tgt, bucket, map[string]any{"part_size": "5MiB", "max_file_size": "64MiB"}))
	big := `{"x":"` + strings.Repeat("y", 1<<20) + `"}`
	var ps []string
	for range 12 {
		ps = append(ps, big)
	}
	require.NoError(t, s.Consume(context.Background(), batchOf("s", "t", 0, 0, ps...)))
	os := objects(t, tgt.Client(t), bucket)
	require.Len(t, os, 1)
	require.Greater(t, len(os[0].Body), 12<<20)
	require.Regexp(t, `-3"?$`, os[0].ETag, "12 MiB in 5 MiB parts: a multipart upload of 3 parts")
	require.Len(t, records(t, tgt.Client(t), bucket), 12)
}

// A batch delivered again after a crash, longer than the first time
// (more messages had arrived), replaces what the first attempt uploaded:
// the objects cover each offset once.
func TestReplayWithALongerBatchLeavesNoOverlap(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	vals := sinkValues(tgt, bucket, map[string]any{"file_rotation": "messages", "max_messages_per_file": int64(4)})
	ctx := context.Background()
	first := newSink(t, vals)
	require.NoError(t, first.Consume(ctx, batchOf("s", "t", 0, 100, numbered(0, 6)...))) // 100-103, 104-105
	// The runtime is killed before the commit; the new one reads further.
	again := newSink(t, vals)
	require.NoError(t, again.Consume(ctx, batchOf("s", "t", 0, 100, numbered(0, 10)...)))
	c := tgt.Client(t)
	require.Equal(t, []string{"s/t/2026-03-16/14/000100-000103.jsonl", "s/t/2026-03-16/14/000104-000107.jsonl",
		"s/t/2026-03-16/14/000108-000109.jsonl"}, keys(objects(t, c, bucket)))
	require.Equal(t, numbered(0, 10), payloadsOf(records(t, c, bucket)))
}

// Stream and topic names cannot shape a key beyond their own segment,
// and nothing from a payload reaches a key.
func TestHostileNamesAndPayloads(t *testing.T) {
	t.Parallel()
	for key, bad := range map[string]any{
		"path_template": "{stream}/{payload}", "bucket": "../etc", "endpoint": "http://h/path",
		"prefix": "a/../../b",
	} {
		v := map[string]any{"bucket": "b-ok", "region": "r"}
		v[key] = bad
		_, err := NewSink(cfg(v))
		require.ErrorContains(t, err, key, "%s = %q", key, bad)
	}
	_, err := NewSink(cfg(map[string]any{"bucket": "b-ok", "region": "r", "access_key_id": "k"}))
	require.ErrorContains(t, err, "secret_access_key")
	_, err = NewSink(cfg(map[string]any{"bucket": "b-ok", "region": "r", "file_rotation": "messages"}))
	require.ErrorContains(t, err, "max_messages_per_file")

	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	s := newSink(t, sinkValues(tgt, bucket, map[string]any{"path_template": "{stream}/{topic}"}))
	hostile := []string{"../../x", "a/b", "..", ".", "%2F", "a b?c#d", "ü\u0000\n"}
	ctx := context.Background()
	for i, name := range hostile {
		p, _ := json.Marshal(map[string]string{"s": "../../" + name})
		require.NoError(t, s.Consume(ctx, batchOf(name, name, 0, uint64(i), string(p))), "name %q", name)
	}
	os := objects(t, tgt.Client(t), bucket)
	require.Len(t, os, len(hostile))
	seen := map[string]bool{}
	for _, o := range os {
		parts := strings.Split(o.Key, "/")
		require.Len(t, parts, 3, "stream/topic/range: %q", o.Key)
		for _, p := range parts[:2] {
			require.NotContains(t, []string{"", ".", ".."}, p, o.Key)
		}
		require.Regexp(t, `^[A-Za-z0-9_.%-]+/[A-Za-z0-9_.%-]+/\d{6}-\d{6}\.jsonl$`, o.Key)
		seen[parts[0]] = true
	}
	require.Len(t, seen, len(hostile), "distinct names make distinct segments")
}

// A bucket that does not exist is refused at Open with a message naming
// it; an upload into a bucket removed since is Unavailable (the runtime
// keeps the batch and restarts the sink), never dropped.
func TestMissingBucket(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	s, err := NewSink(cfg(sinkValues(tgt, "ferry-no-such-bucket", nil)))
	require.NoError(t, err)
	err = s.Open(context.Background())
	require.ErrorContains(t, err, `bucket "ferry-no-such-bucket" (plugin_config.bucket) does not exist`)

	bucket := tgt.Bucket(t)
	open := newSink(t, sinkValues(tgt, bucket, map[string]any{"max_retries": int64(1)}))
	require.NoError(t, tgt.Client(t).RemoveBucket(context.Background(), bucket))
	err = open.Consume(context.Background(), batchOf("s", "t", 0, 0, `{"n":1}`))
	require.True(t, connector.IsUnavailable(err), "%v", err)
	require.ErrorContains(t, err, "the bucket does not exist (plugin_config.bucket")
}

// A server that is not there is Unavailable.
func TestDownServerIsUnavailable(t *testing.T) {
	t.Parallel()
	s, err := NewSink(cfg(map[string]any{"bucket": "b-ok", "region": "us-east-1", "endpoint": "http://127.0.0.1:1",
		"access_key_id": "k", "secret_access_key": "s", "max_retries": int64(2), "retry_delay": "1ms"}))
	require.NoError(t, err)
	err = s.Consume(context.Background(), batchOf("s", "t", 0, 0, `{"n":1}`))
	require.True(t, connector.IsUnavailable(err), "%v", err)
	require.NotContains(t, err.Error(), `"s"`, "no secret in the message")
}
