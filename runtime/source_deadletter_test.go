package runtime

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	reply, err := admin.PollMessages(context.Background(), iggy.SingleConsumer(iggy.NumericID(1)), iggy.NamedID(stream),
		iggy.NamedID(topic), iggy.Partition(0), iggy.First(), 1000, false)
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
	h, err := wire.ParseTLV(m.Headers)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range h {
		out[string(e.Key.Data)] = e.Value.String()
	}
	return out
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

	i := sourceStatus(rt, "files")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
	rec := httptest.NewRecorder()
	rt.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	require.Contains(t, string(body), `iggy_connector_messages_dead_lettered_total{connector_key="files",connector_type="source"} 1`)
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
