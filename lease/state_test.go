package lease

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/state/iggystate"
	"github.com/stretchr/testify/require"
)

// TestLeaseGuardsState is the wiring the runtime does: three processes
// (clients) contend for the lease of a source; the holder claims the
// source's state at its epoch, loads it and saves a counter one step at
// a time until it releases or loses the lease (some holders "crash" by
// closing their connection). Every acknowledged save is counted: at the
// end the state holds exactly that count, so no holder lost another's
// update (a save made from a stale state would be counted but not add
// one), and no save of a holder was refused while it held the lease.
func TestLeaseGuardsState(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const key, holds = "src", 9
	var mu sync.Mutex
	acked, count := 0, 0
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for gen := 0; ctx.Err() == nil; gen++ {
				c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
				if !assertNoError(t, err) {
					return
				}
				crash, done := run(t, ctx, c, key, func() {
					mu.Lock()
					acked++
					mu.Unlock()
				}, func() (bool, bool) {
					mu.Lock()
					defer mu.Unlock()
					if count >= holds {
						return false, true
					}
					count++
					return count%3 == 0, false
				})
				_ = c.Close()
				if done || !crash {
					return
				}
			}
		})
	}
	wg.Wait()
	c := dial(t, b.Addr())
	s, err := iggystate.Open(ctx, c, "ferry", "state")
	require.NoError(t, err)
	st, err := s.Load(ctx, key)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(acked), string(st.Data))
	require.Greater(t, acked, holds, "each holder saved")
	t.Logf("%d saves over %d holds; state version %s", acked, count, st.Version)
}

// run is one process: it acquires the lease and saves the counter until
// it is told to stop (next says whether to crash or whether all is done).
func run(t *testing.T, ctx context.Context, c *iggy.Client, key string, ack func(), next func() (crash, done bool)) (bool, bool) {
	l, err := New(c, key, fast...)
	if !assertNoError(t, err) {
		return false, true
	}
	s, err := iggystate.Open(ctx, c, "ferry", "state")
	if !assertNoError(t, err) {
		return false, true
	}
	defer s.Close()
	for {
		actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
		epoch, lost, err := l.Acquire(actx)
		acancel()
		if errors.Is(err, context.DeadlineExceeded) {
			if _, done := next(); done {
				_ = l.Release(ctx)
				return false, true
			}
			continue
		}
		if !assertNoError(t, err) {
			return false, true
		}
		if !assertNoError(t, s.Claim(ctx, key, epoch)) {
			return false, true
		}
		st, err := s.Load(ctx, key)
		n := 0
		if err == nil {
			n, _ = strconv.Atoi(string(st.Data))
		} else if !errors.Is(err, state.ErrNotFound) {
			t.Errorf("load: %v", err)
			return false, true
		}
		v := st.Version
		deadline := time.After(100 * time.Millisecond)
	hold:
		for {
			select {
			case <-lost:
				break hold
			case <-deadline:
				break hold
			default:
			}
			n++
			v, err = s.Save(ctx, key, []byte(strconv.Itoa(n)), v)
			if err != nil {
				t.Errorf("save %d at epoch %d while holding: %v", n, epoch, err)
				return false, true
			}
			ack()
		}
		crash, done := next()
		if crash || done {
			if !crash {
				_ = l.Release(ctx)
			}
			return crash, done
		}
		if !assertNoError(t, l.Release(ctx)) {
			return false, true
		}
	}
}
