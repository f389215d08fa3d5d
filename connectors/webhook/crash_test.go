package webhook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/stretchr/testify/require"
)

// Ten kill -9 of the runtime while a load generator posts 10,000 signed
// deliveries, each retried on any non-2xx or error: every delivery gets
// a 2xx in the end, and every one is in Iggy exactly once, by id. The
// broker deduplicates by message id (as ferry serve --dedup-max-entries
// and upstream's message_deduplication do): a batch sent whose state
// save a kill cut short got no 2xx, is retried, and is sent again with
// the same UUID v5 ids.
func TestKillNineLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	const total = 10_000
	addr := freeAddr(t)
	e := connectortest.NewCrashEnv(t, map[string]string{"hooks.toml": sourceTOML(addr, "")},
		brokertest.Config(func(c *broker.Config) { c.Dedup = broker.Dedup{MaxEntries: 2 * total} }))
	p := newProvider(t, "http://"+addr+"/sw")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				p.deliver(ctx, fmt.Sprintf("d-%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	final := e.KillLoop(nil, 10, func() (int, int) { return p.acknowledged(), total })
	defer e.Kill(final)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("after five minutes only %d of %d deliveries got a 2xx", p.acknowledged(), total)
	}
	require.Equal(t, total, p.acknowledged())
	msgs := e.Topic("webhooks", "events")
	count := map[[16]byte]int{}
	for _, m := range msgs {
		count[m.ID]++
	}
	for i := range total {
		id := MessageID("/sw", fmt.Sprintf("d-%d", i))
		require.Equal(t, 1, count[id], "delivery %d got a 2xx and is in Iggy %d times", i, count[id])
	}
	require.Len(t, msgs, total, "messages that are no delivery")
	t.Logf("%d deliveries, %d attempts, %d kills: each delivery in Iggy once", total, p.attempts.Load(), e.Kills)
}
