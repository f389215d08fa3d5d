package iggy_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
)

// startBroker runs the embedded broker on a loopback port, with its data
// in a temporary directory, for the test.
func startBroker(t testing.TB, opts ...brokertest.Option) *broker.Broker {
	t.Helper()
	return brokertest.Start(t, opts...)
}

// startBrokerWith starts a broker with some settings of cfg (Addr,
// DataDir, root credentials, TLS, rebalancing timeout) on top of
// brokertest's defaults.
func startBrokerWith(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	var opts []brokertest.Option
	if cfg.DataDir != "" {
		opts = append(opts, brokertest.DataDir(cfg.DataDir))
	}
	opts = append(opts, brokertest.Config(func(c *broker.Config) {
		if cfg.Addr != "" {
			c.Addr = cfg.Addr
		}
		if cfg.RootUsername != "" {
			c.RootUsername, c.RootPassword = cfg.RootUsername, cfg.RootPassword
		}
		if cfg.TLS != nil {
			c.TLS = cfg.TLS
		}
		if cfg.RebalancingTimeout != 0 {
			c.RebalancingTimeout = cfg.RebalancingTimeout
		}
	}))
	return brokertest.Start(t, opts...)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial logs in as root and closes the client when the test ends.
func dial(t testing.TB, addr string, opts ...iggy.Option) *iggy.Client {
	t.Helper()
	c, err := iggy.Dial(testCtx(t), "iggy://iggy:iggy@"+addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var names atomic.Int64

func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

// newTopic creates a stream with one topic of n partitions.
func newTopic(t testing.TB, c *iggy.Client, partitions uint32) (stream, topic iggy.Identifier) {
	t.Helper()
	ctx := testCtx(t)
	s, err := c.CreateStream(ctx, uniqueName("stream"))
	require.NoError(t, err)
	tp, err := c.CreateTopic(ctx, iggy.NumericID(s.ID), "topic", partitions)
	require.NoError(t, err)
	return iggy.NumericID(s.ID), iggy.NumericID(tp.ID)
}

func payloads(prefix string, n int) []iggy.Message {
	msgs := make([]iggy.Message, n)
	for i := range msgs {
		msgs[i].Payload = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	return msgs
}
