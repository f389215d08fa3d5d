package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNextDoublesAndCaps(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for i, tc := range []struct {
		b    Backoff
		want []time.Duration
	}{
		{Backoff{Min: 100 * ms, Max: time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{Backoff{Min: time.Second, Max: 500 * ms}, // Max below Min: constant
			[]time.Duration{time.Second, time.Second, time.Second}},
		{Backoff{Min: 100 * ms}, // no Max: constant
			[]time.Duration{100 * ms, 100 * ms}},
		{Backoff{Min: 100 * ms, Max: time.Second, Factor: 1.5},
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond}},
		{Backoff{Min: 100 * ms, Max: time.Second, Factor: 0.5}, // below 1 is 1
			[]time.Duration{100 * ms, 100 * ms}},
		{Backoff{Max: time.Second}, // no Min: no wait
			[]time.Duration{0, 0}},
		{Backoff{Min: time.Hour, Max: 1<<63 - 1}, // growth never overflows
			[]time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour}},
	} {
		var got []time.Duration
		for range tc.want {
			got = append(got, tc.b.Next())
		}
		require.Equal(t, tc.want, got, "case %d", i)
	}

	b := Backoff{Min: time.Nanosecond, Max: 1<<63 - 1}
	for range 100 {
		require.Positive(t, b.Next(), "doubling saturates at Max")
	}
	require.Equal(t, time.Duration(1<<63-1), b.Next())
}

func TestResetStartsAgainAtMin(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: time.Second, Max: time.Minute}
	b.Next()
	b.Next()
	require.Equal(t, 4*time.Second, b.Next())
	b.Reset()
	require.Equal(t, time.Second, b.Next())
	require.Equal(t, 2*time.Second, b.Next())
}

func TestJitterStaysWithinItsRange(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000}
	spread := false
	for range 50 {
		b.Reset()
		for i, ceil := range ceilings {
			ceil *= time.Millisecond
			d := b.Next()
			require.GreaterOrEqual(t, d, ceil/2, "wait %d", i)
			require.LessOrEqual(t, d, ceil, "wait %d", i)
			spread = spread || d != ceil
		}
	}
	require.True(t, spread, "jitter changes some waits")

	full := Backoff{Min: time.Second, Jitter: 7} // above 1 is 1
	for range 50 {
		d := full.Next()
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, time.Second)
	}
}

func TestWaitReturnsAtOnceOnACancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Min: time.Hour, Max: time.Hour}
	require.ErrorIs(t, b.Wait(ctx), context.Canceled, "an hour's wait is not slept")
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
	require.ErrorIs(t, Sleep(ctx, 0), context.Canceled, "an ended context is reported even without a wait")

	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	require.ErrorIs(t, b.Wait(dctx), context.DeadlineExceeded)
	require.NoError(t, Sleep(context.Background(), 0))
	require.NoError(t, Sleep(context.Background(), -time.Second))
}

func TestSleepOrEndsWhenStopCloses(t *testing.T) {
	t.Parallel()
	errStopped := errors.New("stopped")
	stop := make(chan struct{})
	close(stop)
	require.ErrorIs(t, SleepOr(context.Background(), time.Hour, stop, errStopped), errStopped)
	require.ErrorIs(t, SleepOr(context.Background(), 0, stop, errStopped), errStopped)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, SleepOr(ctx, time.Hour, stop, errStopped), context.Canceled, "the context first")

	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		start := time.Now()
		require.NoError(t, SleepOr(context.Background(), time.Second, stop, errStopped))
		require.Equal(t, time.Second, time.Since(start))
		done := make(chan error, 1)
		go func() { done <- SleepOr(context.Background(), time.Hour, stop, errStopped) }()
		synctest.Wait()
		close(stop)
		require.ErrorIs(t, <-done, errStopped)
		require.Equal(t, time.Second, time.Since(start), "returned when stopped")
	})
}

func TestWaitSleepsTheScheduleOrUntilCancelled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := Backoff{Min: time.Second, Max: 3 * time.Second}
		start := time.Now()
		for _, want := range []time.Duration{1, 3, 6, 9} { // 1 s, 2 s, then 3 s each
			require.NoError(t, b.Wait(ctx))
			require.Equal(t, want*time.Second, time.Since(start), "virtual time")
		}

		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- Sleep(ctx, time.Hour) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Empty(t, done, "still sleeping")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Equal(t, 9*time.Second+time.Minute, time.Since(start), "returned when cancelled, not after the hour")
	})
}
