package nats

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// sinkTOML is a sink connector file as the package doc shows it, with
// every key written out.
func sinkTOML(url string, n natstest.Names, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "nats"
enabled = true
version = 0
name = "NATS sink"
path = "nats"

[[streams]]
stream = "test_stream"
topics = ["test_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "nats_sink_connector"
%s
[plugin_config]
url = %q
username = ""
password = ""
token = ""
credentials_file = ""
name = "ferry"
mode = "jetstream"
timeout = "30s"
subject = "%s.{stream}.{topic}"
stream = %q
include_metadata = true
max_in_flight = 4096
`, extra, url, n.Subject, n.Stream)
}

func sendJSON(t *testing.T, rt interface{ IggyAddress() string }, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// The documented connector file runs; a message above the stream's
// max_msg_size is dead-lettered with JetStream's reason and the others
// are stored.
func TestSinkFileRunsAndDeadLettersARefusedMessage(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n, jetstream.StreamConfig{MaxMsgSize: 4096})
	run := connectortest.Start(t, map[string]string{"nats.toml": sinkTOML(url, n,
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")})
	big := `{"big":"` + strings.Repeat("x", 5000) + `"}`
	sendJSON(t, run.Runtime, "test_stream", "test_topic", `{"n":0}`, big, `{"n":2}`)
	connectortest.Eventually(t, "two messages in the stream", func() bool { return len(stored(t, js, n.Stream)) >= 2 })
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		dead = run.Messages(t, "test_stream", "dlq")
		return len(dead) == 1
	})
	require.Equal(t, []string{`{"n":0}`, `{"n":2}`}, storedPayloads(t, js, n.Stream))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "JetStream refused the message")
	require.Contains(t, strings.ToLower(v.String()), "maximum")
}

// A NATS server killed with kill -9 and started again on its store: the
// sink restarts with backoff, and every message sent to Iggy meanwhile
// is stored in the stream exactly once.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a nats-server of its own")
	}
	t.Parallel()
	srv, n := natstest.Private(t), natstest.NewNames(t)
	js := natstest.Stream(t, srv.URL, n)
	run := connectortest.Start(t, map[string]string{"nats.toml": sinkTOML(srv.URL, n, "retry_backoff = \"5ms\"")})
	sendJSON(t, run.Runtime, "test_stream", "test_topic", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "two messages in the stream", func() bool { return len(stored(t, js, n.Stream)) == 2 })

	srv.Halt()
	var want []string
	for i := 2; i < 12; i++ {
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime, "test_stream", "test_topic", want...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	want = append([]string{`{"n":0}`, `{"n":1}`}, want...)
	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := storedOrNil(js, n.Stream)
		if len(got) >= len(want) {
			require.Equal(t, want, got, "every message once, in order: the store survived and Nats-Msg-Id removed the repeats")
			break
		}
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatalf("after the outage the stream holds %q, want %q", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// storedOrNil is storedPayloads that tolerates a server still starting.
func storedOrNil(js jetstream.JetStream, stream string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil
		}
		out = append(out, string(m.Data))
	}
	return out
}

// NATS → Iggy → NATS through the runtime and its embedded broker: every
// message of the input stream is stored once in the output stream, with
// its headers.
func TestSourceToSinkThroughIggy(t *testing.T) {
	t.Parallel()
	url := natstest.URL(t)
	in, out := natstest.NewNames(t), natstest.NewNames(t)
	inJS := natstest.Stream(t, url, in)
	outJS := natstest.Stream(t, url, out)
	want := publishJS(t, inJS, in.Subject+".orders", 0, 250)
	connectortest.Start(t, map[string]string{
		"in.toml": fmt.Sprintf(`type = "source"
key = "from_nats"
path = "nats"
[[streams]]
stream = "test_stream"
topic = "test_topic"
schema = "json"
[plugin_config]
url = %q
stream = %q
batch_size = 20
batch_wait = "10ms"
`, url, in.Stream),
		"out.toml": sinkTOML(url, out, ""),
	})
	connectortest.Eventually(t, "250 messages in the output stream", func() bool { return len(stored(t, outJS, out.Stream)) >= 250 })
	got := stored(t, outJS, out.Stream)
	require.Equal(t, want, payloadsOf(got))
	require.Equal(t, "acme", got[0].Header.Get("tenant"), "a NATS header through Iggy")
	require.Equal(t, in.Subject+".orders", got[0].Header.Get("nats_subject"))
	require.Equal(t, out.Subject+".test_stream.test_topic", got[0].Subject)
}

func payloadsOf(ms []*jetstream.RawStreamMsg) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Data))
	}
	return out
}
