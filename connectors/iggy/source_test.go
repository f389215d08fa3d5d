package iggy

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// origin is a second Iggy server, the one the source reads, with stream s
// and topic t (one partition).
type origin struct {
	addr   string
	client *iggy.Client
	n      atomic.Int64
}

func newOrigin(t testing.TB) *origin {
	t.Helper()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx := context.Background()
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	return &origin{addr: b.Addr(), client: c}
}

// add sends n messages to the origin, each with a header and an origin
// timestamp, and returns their payloads.
func (o *origin) add(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		var msgs []iggy.Message
		for range min(n-len(out), 1000) {
			i := o.n.Add(1) - 1
			p := fmt.Sprintf(`{"n":%d}`, i)
			msgs = append(msgs, iggy.Message{Payload: []byte(p), Headers: []header.Header{header.New("n", header.StringValue(fmt.Sprint(i)))},
				OriginTimestamp: time.UnixMicro(1_700_000_000_000_000 + i)})
			out = append(out, p)
		}
		_, err := o.client.SendMessages(context.Background(), iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	return out
}

func (o *origin) config(extra map[string]any) connector.Config {
	v := map[string]any{"address": o.addr, "username": "iggy", "password": "iggy", "stream": "s", "topic": "t", "batch_size": 7}
	for k, x := range extra {
		v[k] = x
	}
	return connector.Config{Key: "replica", Plugin: connector.PluginConfig{Values: v}}
}

func TestSourceConformance(t *testing.T) {
	o := newOrigin(t)
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(o.config(nil))
			require.NoError(t, err)
			return s
		},
		Add:           func(t *testing.T, n int) []string { return o.add(t, n) },
		StableIDs:     true,
		AckedPosition: true,
	})
}

func TestBadConfigNamesTheKey(t *testing.T) {
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"address": "x:1", "stream": "s"}, "plugin_config.topic: required key is missing"},
		{map[string]any{"address": "x:1", "stream": "s", "topic": "t", "username": "u"}, "plugin_config.password: username and password go together"},
		{map[string]any{"address": "x:1", "stream": "s", "topic": "t", "token": "tk", "username": "u", "password": "p"}, "plugin_config.token: give a token"},
		{map[string]any{"address": "x:1", "stream": "s", "topic": "t", "batch_size": 0}, "plugin_config.batch_size"},
	} {
		_, err := NewSource(connector.Config{Key: "k", Plugin: connector.PluginConfig{Values: c.values}})
		require.ErrorContains(t, err, c.want)
	}
}
