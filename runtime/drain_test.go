package runtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

type drainKey struct{}

func TestDrainContextOutlivesAStopByTheGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(context.WithValue(context.Background(), drainKey{}, "v"))
		work, cancel := drainContext(parent, 10*time.Second)
		defer cancel()
		require.Equal(t, "v", work.Value(drainKey{}), "values pass through")

		time.Sleep(time.Hour)
		synctest.Wait()
		require.NoError(t, work.Err(), "no stop, no end")

		stop()
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		require.NoError(t, work.Err(), "in-flight work goes on after the stop")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.ErrorIs(t, work.Err(), context.Canceled)
		require.ErrorIs(t, context.Cause(work), errDrainTimeout)
	})
}

func TestDrainContextEndsOnCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		defer stop()
		work, cancel := drainContext(parent, time.Minute)
		cancel()
		require.ErrorIs(t, work.Err(), context.Canceled)
		require.NotErrorIs(t, context.Cause(work), errDrainTimeout)

		// Cancelled during the grace (the work finished): it ended then,
		// not for want of time.
		work, cancel = drainContext(parent, time.Minute)
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, work.Err())
		cancel()
		require.ErrorIs(t, work.Err(), context.Canceled)
		time.Sleep(time.Hour)
		synctest.Wait()
		require.NotErrorIs(t, context.Cause(work), errDrainTimeout)
	})
}
