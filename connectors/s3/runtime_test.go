package s3

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/stretchr/testify/require"
)

// upstreamSinkTOML is upstream's example connector file for the S3 sink
// (core/connectors/sinks/s3_sink/config.toml), adapted only in the
// server's address, keys and bucket, and the poll interval.
func upstreamSinkTOML(tgt s3test.Target, bucket string) string {
	return fmt.Sprintf(`type = "sink"
key = "s3"
enabled = true
version = 0
name = "S3 sink"
path = "target/release/libiggy_connector_s3_sink"
verbose = false

[[streams]]
stream = "application_logs"
topics = ["api_requests", "errors"]
schema = "json"
batch_length = 1000
poll_interval = "5ms"
consumer_group = "s3_sink"

[plugin_config]
bucket = %q
prefix = "iggy/raw"
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
path_template = "{stream}/{topic}/{date}/{hour}"
file_rotation = "size"
max_file_size = "8MiB"
# max_messages_per_file = 10000            # used when file_rotation = "messages"
output_format = "json_lines"
include_metadata = true
include_headers = true
max_attempts = 3
retry_delay = "1s"
# path_style = true                        # auto-enabled when endpoint is set (for MinIO)
`, bucket, tgt.Endpoint, tgt.AccessKey, tgt.Secret)
}

func send(t *testing.T, addr, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// Upstream's connector file runs unchanged but for addresses: what is
// sent to Iggy lands in objects under upstream's key layout, with
// upstream's record shape.
func TestUpstreamSinkFileRuns(t *testing.T) {
	t.Parallel()
	tgt := s3test.Shared(t)
	bucket := tgt.Bucket(t)
	run := connectortest.Start(t, map[string]string{"s3.toml": upstreamSinkTOML(tgt, bucket)})
	send(t, run.Runtime.IggyAddress(), "application_logs", "api_requests", numbered(0, 25)...)
	c := tgt.Client(t)
	var rs []record
	connectortest.Eventually(t, "25 records in the bucket", func() bool {
		rs = records(t, c, bucket)
		return len(rs) >= 25
	})
	require.Equal(t, numbered(0, 25), payloadsOf(rs))
	for i, r := range rs {
		require.Equal(t, uint64(i), r.Offset)
		require.Equal(t, "application_logs", r.Stream)
		require.Equal(t, "api_requests", r.Topic)
	}
	for _, k := range keys(objects(t, c, bucket)) {
		require.Regexp(t, `^iggy/raw/application_logs/api_requests/\d{4}-\d\d-\d\d/\d\d/\d{6}-\d{6}\.jsonl$`, k)
	}
}

// An S3 server that is down for a while: the sink restarts with backoff
// and nothing sent to Iggy meanwhile is lost or written twice.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a server of its own")
	}
	t.Parallel()
	srv := s3test.Private(t)
	bucket := srv.Bucket(t)
	toml := strings.Replace(upstreamSinkTOML(srv.Target, bucket), `retry_delay = "1s"`, `retry_delay = "10ms"`, 1)
	run := connectortest.Start(t, map[string]string{"s3.toml": toml})
	addr := run.Runtime.IggyAddress()
	send(t, addr, "application_logs", "api_requests", numbered(0, 2)...)
	c := srv.Client(t)
	connectortest.Eventually(t, "2 records", func() bool { return len(records(t, c, bucket)) == 2 })

	srv.Halt()
	send(t, addr, "application_logs", "api_requests", numbered(2, 10)...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	var got []record
	deadline := time.Now().Add(3 * time.Minute)
	for len(got) < 12 {
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatalf("after the outage %d of 12 records arrived", len(got))
		}
		time.Sleep(50 * time.Millisecond)
		got = records(t, c, bucket)
	}
	require.Equal(t, numbered(0, 12), payloadsOf(got), "every record once, in order")
}
