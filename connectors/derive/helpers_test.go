package derive

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// dedupBroker starts a broker that deduplicates by message id, as ferry
// serve --dedup-max-entries does.
func dedupBroker(t testing.TB) *broker.Broker {
	return brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) { c.Dedup.MaxEntries = 1 << 20 }))
}

// newSink builds and opens a derive sink writing to addr, its state in
// dir, with the plugin_config values pc on top of the defaults.
func newSink(t testing.TB, addr, dir string, pc map[string]any) *Sink {
	t.Helper()
	vals := map[string]any{"to": "out/changes", "address": addr, "state_dir": dir}
	for k, v := range pc {
		vals[k] = v
	}
	c, err := New(connector.Config{Key: "d1", Plugin: connector.PluginConfig{Values: vals, Source: "test"}})
	require.NoError(t, err)
	s := c.(*Sink)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	return s
}

func closeSink(t testing.TB, s *Sink) {
	require.NoError(t, s.Close(context.Background()))
}

// msg is an input message at offset off with key (none when "") and a
// JSON payload.
func msg(off uint64, key, payload string) connector.Message {
	m := connector.Message{Offset: off, Payload: []byte(payload), Timestamp: time.UnixMilli(int64(off))}
	if key != "" {
		m.Headers = []connector.Header{connector.StringHeader(iggy.KeyHeader, key)}
	}
	return m
}

func batch(msgs ...connector.Message) *connector.SinkBatch {
	return &connector.SinkBatch{Stream: "in", Topic: "events", Partition: 0, Schema: connector.SchemaJSON, Messages: msgs}
}

func consume(t testing.TB, s *Sink, b *connector.SinkBatch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Consume(ctx, b)
}

// change is one output message, decoded.
type change struct {
	ID      [16]byte
	Key     string
	Deleted bool
	Value   map[string]any
}

// readChanges reads every message of the output topic, in order.
func readChanges(t testing.TB, addr, stream, topic string) []change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer c.Close()
	var out []change
	for {
		r, err := c.PollMessages(ctx, iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic),
			Partition: iggy.Partition(0), Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000,
		})
		if err != nil || len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			ch := change{ID: m.ID}
			k, ok := m.Key()
			require.True(t, ok, "output at offset %d has no key header", m.Offset)
			ch.Key = string(k.Data)
			if v, ok := header.Get(m.Headers, iggy.DeletedHeader); ok {
				ch.Deleted = v.Bool()
			}
			require.NoError(t, json.Unmarshal(m.Payload, &ch.Value), "%s", m.Payload)
			out = append(out, ch)
		}
	}
}

// latest is the last value per changelog key; deleted keys are absent.
func latest(chs []change) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, c := range chs {
		if c.Deleted {
			delete(m, c.Key)
		} else {
			m[c.Key] = c.Value
		}
	}
	return m
}

func jsonf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
