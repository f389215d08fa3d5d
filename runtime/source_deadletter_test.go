package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/file"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// The reported case: a file source with format = "lines" into a json
// stream, one line of which is not JSON.
const linesWithOneBad = "{\"n\":0}\n{\"n\":1}\nnot json\n{\"n\":2}\n{\"n\":3}\n"

// badLineAt is where linesWithOneBad's bad line starts.
const badLineAt = 16

// fileSourceEnv is a runtime with the real file source reading in.txt,
// followed (so the source keeps running), into the json stream s/t.
func fileSourceEnv(t *testing.T, content, streamKeys string) (*env, string) {
	t.Helper()
	e := newEnv(t)
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: "file", NewSource: file.NewSource}))
	in := filepath.Join(e.dir, "in.txt")
	require.NoError(t, os.WriteFile(in, []byte(content), 0o644))
	e.connector("files", fmt.Sprintf(`
type = "source"
key = "files"
path = "file"
[[streams]]
stream = "s"
topic = "t"
schema = "json"
%s
[plugin_config]
paths = [%q]
format = "lines"
follow = true
poll_interval = "10ms"
`, streamKeys, in))
	return e, in
}

// topicMessages reads every message of stream/topic's partition 0.
func topicMessages(t *testing.T, rt *Runtime, stream, topic string) []iggy.Message {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1000,
	})
	if err != nil {
		return nil // not created yet
	}
	return reply.Messages
}

func payloads(msgs []iggy.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Payload)
	}
	return out
}

func headersOf(t *testing.T, m iggy.Message) map[string]string {
	t.Helper()
	h := m.Headers
	out := map[string]string{}
	for _, e := range h {
		out[string(e.Key.Data)] = e.Value.String()
	}
	return out
}

// deadLettered is the source's iggy_connector_messages_dead_lettered_total
// as /metrics shows it.
func deadLettered(rt *Runtime, key string) string {
	return metric(rt, fmt.Sprintf("iggy_connector_messages_dead_lettered_total{connector_key=%q,connector_type=\"source\"}", key))
}

// metric is the value of a series (name and labels, as /metrics writes
// them) on /metrics, or "".
func metric(rt *Runtime, series string) string {
	rec := httptest.NewRecorder()
	rt.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

func sourceStatus(rt *Runtime, key string) Info {
	i, _ := rt.Connector(connector.KindSource, key)
	return i
}

// One line that is not JSON goes to the dead-letter topic with its reason
// and position; every valid line, before and after it, reaches the topic,
// and the source keeps running (on_error = "dead_letter" is the default).
func TestSourceDeadLettersALineThatIsNotJSON(t *testing.T) {
	require.Equal(t, HeaderSourcePosition, file.PositionHeader, "the file source sets the header the runtime reads")
	e, in := fileSourceEnv(t, linesWithOneBad, "")
	rt := e.start()
	eventually(t, "the four valid lines in s/t", func() bool { return len(topicMessages(t, rt, "s", "t")) >= 4 })
	sent := topicMessages(t, rt, "s", "t")
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`, `{"n":3}`}, payloads(sent))
	for _, m := range sent {
		require.Empty(t, m.Headers, "the position header is for dead letters only")
	}

	var dead []iggy.Message
	eventually(t, "the bad line in s/files_dead_letter", func() bool {
		dead = topicMessages(t, rt, "s", "files_dead_letter")
		return len(dead) > 0
	})
	require.Len(t, dead, 1)
	require.Equal(t, "not json", string(dead[0].Payload), "the original payload")
	h := headersOf(t, dead[0])
	require.Contains(t, h[HeaderDLQError], "JSON", "the reason")
	require.Equal(t, in+" at byte "+fmt.Sprint(badLineAt), h[HeaderSourcePosition], "its position in the source")
	require.Equal(t, "2", h[HeaderDLQSourceIndex], "its index in the polled batch")
	require.Equal(t, "text", h[HeaderDLQSchema], "the payload's schema, as the source polled it")
	require.Equal(t, "s", h[HeaderDLQStream])
	require.Equal(t, "t", h[HeaderDLQTopic])
	require.Equal(t, "files", h[HeaderDLQConnector])
	require.NotContains(t, h, HeaderDLQOffset, "a source's message has no offset yet")

	eventually(t, "the dead letter counted", func() bool { return deadLettered(rt, "files") == "1" })
	i := sourceStatus(rt, "files")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
}

// With on_error = "stop", the bad line stops the source before anything
// of its batch is sent, with an error naming the line and the reason;
// once the file is fixed, the source goes on from its saved state.
func TestSourceStopsAtALineThatIsNotJSON(t *testing.T) {
	e, in := fileSourceEnv(t, linesWithOneBad, `on_error = "stop"`)
	rt := e.start()
	eventually(t, "source in Error", func() bool { return sourceStatus(rt, "files").Status == StatusError })
	i := sourceStatus(rt, "files")
	require.Contains(t, i.LastError, fmt.Sprintf("message 2 of the polled batch (%s at byte %d) cannot be sent to stream s/t", in, badLineAt))
	require.Contains(t, i.LastError, "JSON", "the reason")
	require.Contains(t, i.LastError, `on_error = "dead_letter"`, "what to change to go on")
	require.Empty(t, topicMessages(t, rt, "s", "t"), "nothing of the batch is sent")
	require.Empty(t, topicMessages(t, rt, "s", "files_dead_letter"), "and nothing is dead-lettered")

	fixed := strings.Replace(linesWithOneBad, "not json", `{"fixed":true}`, 1)
	tmp := in + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(fixed), 0o644))
	require.NoError(t, os.Rename(tmp, in))
	eventually(t, "the fixed file in s/t", func() bool { return len(topicMessages(t, rt, "s", "t")) >= 5 })
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"fixed":true}`, `{"n":2}`, `{"n":3}`}, payloads(topicMessages(t, rt, "s", "t")))
	eventually(t, "source running", func() bool { return sourceStatus(rt, "files").Status == StatusRunning })
}

// A message one stream takes and another cannot has the same id in the
// first and in the second's dead-letter topic, also when the dead-letter
// send is retried; the batch is acknowledged once both are in.
func TestSourceDeadLetterKeepsTheMessageID(t *testing.T) {
	e := newEnv(t)
	src := &scriptSource{pollDelay: 20 * time.Millisecond, script: []*connector.Batch{{Schema: connector.SchemaText,
		Messages: []connector.Message{{Payload: []byte(`{"a":1}`)}, {Payload: []byte("bad")}, {Payload: []byte(`{"a":2}`)}},
		State:    []byte("s1")}}}
	registerScript(t, e, "script", src)
	const two = `
type = "source"
key = "two"
path = "script"
enabled = %v
[[streams]]
stream = "s"
topic = "plain"
schema = "text"
[[streams]]
stream = "s"
topic = "strict"
schema = "json"
`
	e.connector("two", fmt.Sprintf(two, false))
	rt := e.start()
	var mu sync.Mutex
	var attempts [][16]byte // the id of each dead-letter send
	stop := rt.broker.Control(wire.CmdSendMessages, func(r broker.Request) broker.Action {
		var req wire.SendMessages
		if wire.Unmarshal(r.Body, &req) != nil || req.Topic.Name() != "two_dead_letter" {
			return broker.Action{}
		}
		msgs, err := wire.AppendRecordMessages(nil, req.Batch)
		if err != nil || len(msgs) != 1 {
			return broker.Action{}
		}
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, msgs[0].ID)
		return broker.Action{Drop: len(attempts) == 1}
	})
	defer stop()
	e.connector("two", fmt.Sprintf(two, true))
	require.NoError(t, rt.Restart(context.Background(), connector.KindSource, "two"))

	eventually(t, "the batch acknowledged", func() bool { return src.acks.Load() == 1 })
	plain, strict, dead := topicMessages(t, rt, "s", "plain"), topicMessages(t, rt, "s", "strict"), topicMessages(t, rt, "s", "two_dead_letter")
	require.Equal(t, []string{`{"a":1}`, "bad", `{"a":2}`}, payloads(plain), "a text stream takes every line")
	require.Equal(t, []string{`{"a":1}`, `{"a":2}`}, payloads(strict))
	require.Equal(t, []string{"bad"}, payloads(dead))
	require.Equal(t, plain[1].ID, dead[0].ID, "the dead letter has the id the message has in the other stream")
	require.Equal(t, plain[1].OriginTimestamp, dead[0].OriginTimestamp)
	require.Equal(t, plain[0].ID, strict[0].ID)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 2, "the dropped dead-letter send was retried")
	require.Equal(t, attempts[0], attempts[1], "with the same id")
	require.Equal(t, "strict", headersOf(t, dead[0])[HeaderDLQTopic])
	require.Equal(t, StatusRunning, sourceStatus(rt, "two").Status)
}

// Many dead letters in one batch are each counted, the first few logged
// one by one and the rest in one line; a message whose headers Iggy would
// refuse is dead-lettered with the dead-letter headers only.
func TestSourceDeadLettersOfABatchAreCountedAndLoggedOnce(t *testing.T) {
	e := newEnv(t)
	b := &connector.Batch{Schema: connector.SchemaText}
	for i := range 10 {
		b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil, "bad %d", i)})
	}
	var big []connector.Header
	for i := range 500 {
		big = append(big, connector.StringHeader(fmt.Sprintf("h%03d", i), strings.Repeat("x", 250)))
	}
	b.Messages = append(b.Messages, connector.Message{Payload: []byte(`{"big":true}`), Headers: big}, connector.Message{Payload: []byte(`{"ok":true}`)})
	src := &scriptSource{pollDelay: 20 * time.Millisecond, script: []*connector.Batch{b}}
	registerScript(t, e, "script", src)
	e.connector("many", "type = \"source\"\nkey = \"many\"\npath = \"script\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n")
	var logs syncBuffer
	cfg, err := config.Load(filepath.Join(e.dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: e.reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	defer rt.Stop(context.Background())

	eventually(t, "the batch acknowledged", func() bool { return src.acks.Load() == 1 })
	require.Equal(t, []string{`{"ok":true}`}, payloads(topicMessages(t, rt, "s", "t")))
	dead := topicMessages(t, rt, "s", "many_dead_letter")
	require.Len(t, dead, 11)
	h := headersOf(t, dead[10])
	require.Contains(t, h[HeaderDLQError], "user headers")
	require.Equal(t, "10", h[HeaderDLQSourceIndex])
	require.NotContains(t, h, "h000", "headers over the limit are not kept")
	require.Equal(t, deadLetterLogs, strings.Count(logs.String(), `msg="message sent to the dead-letter topic"`))
	require.Regexp(t, `msg="more messages of the batch sent to dead-letter topics" .*count=6\n`, logs.String())
	require.Equal(t, "11", deadLettered(rt, "many"), "counted before the batch is acknowledged")
}
