package runtime

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// scriptSource returns the scripted batches in order, then blocks in Poll
// for pollDelay at a time; it records whether Close ever ran while a Poll
// was in progress.
type scriptSource struct {
	script    []*connector.Batch
	pollDelay time.Duration
	next      atomic.Int32
	inPoll    atomic.Bool
	overlap   atomic.Bool
	closed    atomic.Int32
	acks      atomic.Int32
}

func (s *scriptSource) Open(context.Context, []byte) error { return nil }
func (s *scriptSource) Poll(ctx context.Context) (*connector.Batch, error) {
	s.inPoll.Store(true)
	defer s.inPoll.Store(false)
	if n := int(s.next.Add(1)) - 1; n < len(s.script) {
		return s.script[n], nil
	}
	select {
	case <-time.After(s.pollDelay): // a slow query that finishes its round
	case <-ctx.Done():
		time.Sleep(s.pollDelay / 2) // and returns a little after cancellation
	}
	return nil, ctx.Err()
}
func (s *scriptSource) Ack(context.Context, *connector.Batch) error   { s.acks.Add(1); return nil }
func (s *scriptSource) Nack(context.Context, *connector.Batch, error) {}
func (s *scriptSource) Close(context.Context) error {
	if s.inPoll.Load() {
		s.overlap.Store(true)
	}
	s.closed.Add(1)
	return nil
}

func registerScript(t *testing.T, e *env, name string, src *scriptSource) {
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: name,
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}))
}

func TestCloseNeverRunsBesidePoll(t *testing.T) {
	e := newEnv(t)
	// The first batch cannot be delivered (an empty payload is refused, and
	// on_error = "stop" does not dead-letter it), so the run ends while
	// the poller is already in its next, slow Poll.
	src := &scriptSource{pollDelay: 300 * time.Millisecond,
		script: []*connector.Batch{{Schema: connector.SchemaJSON, Messages: []connector.Message{{Payload: nil}}}}}
	registerScript(t, e, "script", src)
	toml := strings.Replace(strings.Replace(seqSourceTOML, "%s", "bad", 1), `path = "seq"`, `path = "script"`, 1)
	e.connector("bad", strings.Replace(toml, `topic = "t"`, "topic = \"t\"\non_error = \"stop\"", 1))
	rt := e.start()
	eventually(t, "source in Error", func() bool {
		i, _ := rt.Connector(connector.KindSource, "bad")
		return i.Status == StatusError
	})
	i, _ := rt.Connector(connector.KindSource, "bad")
	require.Contains(t, i.LastError, "payload is empty", "an undeliverable message shows, it does not wedge the source")
	eventually(t, "closed", func() bool { return src.closed.Load() > 0 })
	require.False(t, src.overlap.Load(), "Close ran while Poll was still running")
}

func TestStateOnlyBatchDoesNotSetTheSchema(t *testing.T) {
	e := newEnv(t)
	// A state-only batch (JSON by default) is followed at once by an Avro
	// datum; merged, the datum must go to the Avro stream as Avro, not be
	// read as JSON.
	src := &scriptSource{pollDelay: 20 * time.Millisecond, script: []*connector.Batch{
		{State: []byte("s1")},
		{Schema: connector.SchemaAvro, Messages: []connector.Message{{Payload: []byte{0x02}}}, State: []byte("s2")},
	}}
	registerScript(t, e, "script", src)
	e.connector("avro", `
type = "source"
key = "avro"
path = "script"
[[streams]]
stream = "s"
topic = "t"
schema = "avro"
linger_time = "200ms"
avro_schema_json = '{"type":"record","name":"r","fields":[{"name":"n","type":"long"}]}'
`)
	rt := e.start()
	eventually(t, "both batches acknowledged", func() bool { return src.acks.Load() == 2 })
	i, _ := rt.Connector(connector.KindSource, "avro")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
}

func TestRetriedBatchKeepsItsMessageIDs(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 5, batch: 5}
	e.sinks["out"] = &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("out", "type = \"sink\"\nkey = \"out\"\npath = \"collect\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n")
	// Start the runtime's broker first, then watch its sends before the
	// source runs: record each attempt's ids and drop the first attempt.
	rt := e.start()
	require.NotNil(t, rt.broker)
	eventually(t, "5 messages", func() bool { return len(e.sinks["out"].messages()) >= 5 })

	var mu sync.Mutex
	var attempts [][][16]byte
	stop := rt.broker.Control(wire.CmdSendMessages, func(r broker.Request) broker.Action {
		var req wire.SendMessages
		if wire.Unmarshal(r.Body, &req) != nil || req.Topic != wire.NamedID("t") {
			return broker.Action{} // not the source's (the runtime's own events go elsewhere)
		}
		msgs, err := wire.AppendRecordMessages(nil, req.Batch)
		if err != nil {
			return broker.Action{}
		}
		var ids [][16]byte
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, ids)
		return broker.Action{Drop: len(attempts) == 1}
	})
	defer stop()
	// A new instance continues the sequence (its saved state says 5).
	e.sources["numbers"] = &seqSource{max: 10, batch: 5}
	require.NoError(t, rt.Restart(context.Background(), connector.KindSource, "numbers"))
	eventually(t, "10 messages", func() bool { return len(e.sinks["out"].messages()) >= 10 })
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(attempts), 2)
	require.Equal(t, attempts[0], attempts[1], "the retry carries the same ids")
}
