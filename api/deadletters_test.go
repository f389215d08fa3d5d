package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// pickySink refuses, as a permanent error, every message whose payload
// holds "bad" until fixed; it records the payloads it wrote.
type pickySink struct {
	fixed *atomic.Bool
	mu    *sync.Mutex
	wrote *[]string
}

func (s *pickySink) Open(context.Context) error  { return nil }
func (s *pickySink) Close(context.Context) error { return nil }

func (s *pickySink) Consume(_ context.Context, b *connector.SinkBatch) error {
	errs := connector.MessageErrors{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range b.Messages {
		if bytes.Contains(m.Payload, []byte("bad")) && !s.fixed.Load() {
			errs[i] = connector.Permanent(errorString("refused: " + string(m.Payload)))
			continue
		}
		*s.wrote = append(*s.wrote, string(m.Payload))
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// idleSource produces nothing.
type idleSource struct{}

func (idleSource) Open(context.Context, []byte) error { return nil }
func (idleSource) Close(context.Context) error        { return nil }
func (idleSource) Poll(ctx context.Context) (*connector.Batch, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

const dlAPIKey = "dead-letters-test-key"

// Connector files of the dead-letter test: a sink that dead-letters, one
// that stops on errors, and a disabled source (its dead-letter topic is
// never made).
var dlFiles = map[string]string{
	"picky.toml": `
type = "sink"
key = "picky"
path = "picky"
[[streams]]
stream = "s"
topics = ["in"]
poll_interval = "5ms"
max_retries = 0
on_error = "dead_letter"
`,
	"plain.toml": `
type = "sink"
key = "plain"
path = "picky"
[[streams]]
stream = "s"
topics = ["other"]
poll_interval = "5ms"
`,
	"idle.toml": `
type = "source"
key = "idle"
path = "idle"
enabled = false
[[streams]]
stream = "s"
topic = "idle-out"
`,
}

type dlEnv struct {
	*env
	fixed atomic.Bool
	mu    sync.Mutex
	wrote []string
}

func (e *dlEnv) written(payload string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.wrote {
		if w == payload {
			n++
		}
	}
	return n
}

func newDLEnv(t *testing.T) *dlEnv {
	t.Helper()
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	require.NoError(t, os.MkdirAll(conns, 0o755))
	for name, content := range dlFiles {
		require.NoError(t, os.WriteFile(filepath.Join(conns, name), []byte(content), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`
[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`), 0o644))
	e := &dlEnv{env: &env{t: t, dir: dir, key: dlAPIKey}}
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "picky",
		NewSink: func(connector.Config) (connector.Sink, error) {
			return &pickySink{fixed: &e.fixed, mu: &e.mu, wrote: &e.wrote}, nil
		}}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "idle",
		NewSource: func(connector.Config) (connector.Source, error) { return idleSource{}, nil }}))
	noEnv := config.WithEnv(config.MapEnv(nil))
	rcfg, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := runtime.New(rcfg, runtime.Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	e.rt = rt
	e.srv, e.url = startServer(t, rt, config.HTTP{APIKey: dlAPIKey}, nil)
	return e
}

// TestDeadLettersEndpoints: a sink dead-letters a message; GET
// .../dead_letters shows it with its reason; a one-message replay sends
// it back to its topic under its replay id and leaves the replay offset;
// a bulk replay then sends it again under the same id, which the
// embedded broker stores once; foreign topics, bad bodies and callers
// without the key are refused.
func TestDeadLettersEndpoints(t *testing.T) {
	t.Parallel()
	e := newDLEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := e.rt.Admin()
	require.NotNil(t, cl)
	eventually(t, "picky running", func() bool { return e.statusOf("sink", "picky") == "running" })
	var msgs []iggy.Message
	for _, p := range []string{`{"v":"one"}`, `{"v":"bad"}`, `{"v":"two"}`} {
		msgs = append(msgs, iggy.Message{ID: uuid.New(), Payload: []byte(p)})
	}
	_, err := cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("in"), iggy.Balanced(), msgs)
	require.NoError(t, err)
	eventually(t, "the good messages written", func() bool { return e.written(`{"v":"two"}`) == 1 })

	const topic = "picky_dead_letter"
	var body struct {
		Key        string  `json:"key"`
		DeadLetter bool    `json:"dead_letter"`
		Note       string  `json:"note"`
		Offset     *uint64 `json:"offset"`
		Limit      int     `json:"limit"`
		Topics     []struct {
			dlq.Topic
			Exists  bool         `json:"exists"`
			Letters []dlq.Letter `json:"letters"`
		} `json:"topics"`
	}
	get := func(path string) {
		t.Helper()
		r := e.do("GET", path, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		body.Topics = nil
		require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
	}
	eventually(t, "the bad message dead-lettered", func() bool {
		get("/sinks/picky/dead_letters")
		return len(body.Topics) == 1 && len(body.Topics[0].Letters) == 1
	})
	require.True(t, body.DeadLetter)
	require.Nil(t, body.Offset)
	require.Equal(t, 50, body.Limit)
	tp := body.Topics[0]
	require.Equal(t, "s", tp.Stream)
	require.Equal(t, topic, tp.Topic.Topic)
	require.True(t, tp.Exists)
	require.Equal(t, uint64(1), tp.Messages)
	require.Equal(t, uint64(0), tp.Replayed)
	l := tp.Letters[0]
	require.Equal(t, "picky", l.Connector)
	require.Contains(t, l.Error, `refused: {"v":"bad"}`)
	require.Equal(t, `{"v":"bad"}`, l.Payload)
	require.Equal(t, "in", l.Topic)
	require.Equal(t, uint64(1), *l.OrigOffset)
	require.Equal(t, uuid.UUID(msgs[1].ID).String(), l.ID)
	get("/sinks/picky/dead_letters?offset=1&limit=5")
	require.Empty(t, body.Topics[0].Letters, "nothing from offset 1")
	require.Equal(t, uint64(1), *body.Offset)

	get("/sinks/plain/dead_letters")
	require.False(t, body.DeadLetter)
	require.Contains(t, body.Note, `on_error = "dead_letter"`)
	require.Empty(t, body.Topics)
	get("/sources/idle/dead_letters")
	require.True(t, body.DeadLetter, "a source dead-letters by default")
	require.Len(t, body.Topics, 1)
	require.Equal(t, "idle_dead_letter", body.Topics[0].Topic.Topic)
	require.False(t, body.Topics[0].Exists, "a disabled source's topic was never made")
	require.NotNil(t, body.Topics[0].Letters)
	require.Empty(t, body.Topics[0].Letters)

	requireError(t, e.do("GET", "/sinks/picky/dead_letters?offset=-1", ""), 400, "bad_request", "offset")
	requireError(t, e.do("GET", "/sinks/picky/dead_letters?limit=0", ""), 400, "bad_request", "limit")
	requireError(t, e.do("GET", "/sinks/nope/dead_letters", ""), 404, "sink_not_found", "nope")

	// Refused: no key, a web page's Origin, a body that is not JSON, a
	// topic of someone else, bad fields.
	const replay = "/sinks/picky/dead_letters/replay"
	one := `{"stream":"s","topic":"` + topic + `","partition":0,"offset":0}`
	r := request(t, http.DefaultClient, "POST", e.url+replay, one, nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	r = request(t, http.DefaultClient, "POST", e.url+replay, one, headers(APIKeyHeader, dlAPIKey, "Origin", "https://evil.example"))
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = request(t, http.DefaultClient, "POST", e.url+replay, one, headers(APIKeyHeader, dlAPIKey, "Content-Type", "text/plain"))
	require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"in"}`), 400, "bad_request", "topic: s/in is not a dead-letter topic of sink \"picky\"")
	requireError(t, e.do("POST", "/sinks/plain/dead_letters/replay", `{"stream":"s","topic":"`+topic+`"}`), 400, "bad_request", "topic")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","dryrun":true}`), 400, "bad_request", "dryrun")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","partition":0}`), 400, "bad_request", "offset")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","partition":"0","offset":0}`), 400, "bad_request", "partition")
	requireError(t, e.do("POST", replay, `{"topic":"`+topic+`"}`), 400, "bad_request", "stream")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","to":"nostream"}`), 400, "bad_request", "to")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","partition":3,"offset":0}`), 400, "bad_request", "partition")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","partition":0,"offset":9}`), 404, "dead_letter_not_found", "offset 9")
	requireError(t, e.do("POST", replay, `{"stream":"s","topic":"`+topic+`","to":"s/nosuch"}`), 404, "topic_not_found", "s/nosuch")
	get("/sinks/picky/dead_letters")
	require.Equal(t, uint64(0), body.Topics[0].Replayed, "the failed replay stored no offset")

	// One message: a dry run names the replay id; then for real, once the
	// sink is fixed. The replay offset stays.
	wantID := uuid.UUID(dlq.ReplayID("s", topic, 0, 0, msgs[1].ID)).String()
	var res dlq.ReplayResult
	post := func(body string) {
		t.Helper()
		r := e.do("POST", replay, body)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		res = dlq.ReplayResult{}
		require.NoError(t, json.Unmarshal(r.body, &res), "%s", r.body)
	}
	post(`{"stream":"s","topic":"` + topic + `","partition":0,"offset":0,"dry_run":true}`)
	require.Equal(t, dlq.ReplayResult{Replayed: 1, To: map[string]int{"s/in": 1}, DryRun: true,
		Messages: []dlq.Sent{{Partition: 0, Offset: 0, ID: wantID, To: "s/in"}}}, res)
	e.fixed.Store(true)
	post(one)
	require.Equal(t, 1, res.Replayed)
	require.False(t, res.DryRun)
	eventually(t, "the replayed message written", func() bool { return e.written(`{"v":"bad"}`) == 1 })
	get("/sinks/picky/dead_letters")
	require.Equal(t, uint64(0), body.Topics[0].Replayed, "a one-message replay leaves the replay offset")
	require.Equal(t, uint64(0), body.Topics[0].Partitions[0].ReplayFrom)

	// All of them: the same letter again, under the same id, stored once.
	post(`{"stream":"s","topic":"` + topic + `"}`)
	require.Equal(t, []dlq.Sent{{Partition: 0, Offset: 0, ID: wantID, To: "s/in"}}, res.Messages)
	get("/sinks/picky/dead_letters")
	require.Equal(t, uint64(1), body.Topics[0].Replayed)
	post(`{"stream":"s","topic":"` + topic + `"}`)
	require.Zero(t, res.Replayed, "nothing after the replay offset")
	in, err := cl.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("in"))
	require.NoError(t, err)
	require.Equal(t, uint64(4), in.MessagesCount, "three messages and one replay")
	reply, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(7)),
		Stream: iggy.NamedID("s"), Topic: iggy.NamedID("in"), Partition: iggy.Partition(0), Strategy: iggy.AtOffset(3), Count: 1})
	require.NoError(t, err)
	require.Len(t, reply.Messages, 1)
	require.Equal(t, wantID, uuid.UUID(reply.Messages[0].ID).String())
	v, ok := header.Get(reply.Messages[0].Headers, dlq.HeaderReplayOf)
	require.True(t, ok)
	require.Equal(t, uuid.UUID(msgs[1].ID).String(), string(v.Data))
	require.Equal(t, 1, e.written(`{"v":"bad"}`), "the sink wrote the replay once")

	// The disabled source's topic does not exist: nothing to replay.
	r = e.do("POST", "/sources/idle/dead_letters/replay", `{"stream":"s","topic":"idle_dead_letter"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"replayed":0,"to":{},"dry_run":false,"messages":[]}`, string(r.body))
}

// TestStreamsEndpoint: GET /streams lists the server's streams with
// their topics, and needs the key.
func TestStreamsEndpoint(t *testing.T) {
	t.Parallel()
	e := newDLEnv(t)
	eventually(t, "picky running", func() bool { return e.statusOf("sink", "picky") == "running" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.rt.Admin().SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("other"), iggy.Balanced(),
		[]iggy.Message{{ID: uuid.New(), Payload: []byte(`{"n":1}`)}, {ID: uuid.New(), Payload: []byte(`{"n":2}`)}})
	require.NoError(t, err)

	r := e.do("GET", "/streams", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var streams []map[string]any
	require.NoError(t, json.Unmarshal(r.body, &streams), "%s", r.body)
	var s map[string]any
	for _, st := range streams {
		if st["name"] == "s" {
			s = st
		}
	}
	require.NotNil(t, s, "stream s in %s", r.body)
	require.ElementsMatch(t, []string{"id", "name", "created_at", "messages_count", "size_bytes", "topics"}, keys(s))
	_, err = time.Parse(time.RFC3339Nano, s["created_at"].(string))
	require.NoError(t, err)
	topics := map[string]map[string]any{}
	for _, tp := range s["topics"].([]any) {
		m := tp.(map[string]any)
		topics[m["name"].(string)] = m
	}
	require.Contains(t, topics, "in")
	require.Contains(t, topics, "picky_dead_letter")
	other := topics["other"]
	require.ElementsMatch(t, []string{"id", "name", "created_at", "partitions", "messages_count", "size_bytes"}, keys(other))
	require.Equal(t, 1.0, other["partitions"])
	require.Equal(t, 2.0, other["messages_count"])
	require.Greater(t, other["size_bytes"], 0.0)

	r = request(t, http.DefaultClient, "GET", e.url+"/streams", "", nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
}
