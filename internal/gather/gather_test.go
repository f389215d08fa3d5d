package gather

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func even(n int) bool { return n%2 == 0 }

func TestBatchFillsToMaxCounted(t *testing.T) {
	items := make(chan int, 10)
	for i := range 10 {
		items <- i
	}
	got, n, err := Batch(context.Background(), items, nil, nil, even, 3, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3, 4}, got, "stops once three counted items are in")
	require.Equal(t, 3, n)
}

func TestBatchLingers(t *testing.T) {
	items := make(chan int, 1)
	items <- 7
	got, n, err := Batch(context.Background(), items, nil, nil, even, 100, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, []int{7}, got, "the linger ends a batch that is not full")
	require.Zero(t, n)
}

func TestBatchReturnsWhatItTookWhenCancelled(t *testing.T) {
	items := make(chan int, 1)
	items <- 2
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	got, _, err := Batch(ctx, items, nil, []int{0}, even, 100, time.Hour)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int{0, 2}, got, "the carry and what was taken, for the next call")
}

func TestBatchErrorBeforeTheFirstItem(t *testing.T) {
	errc := make(chan error, 1)
	errc <- errors.New("stream broke")
	_, _, err := Batch(context.Background(), make(chan int), errc, nil, even, 1, time.Hour)
	require.EqualError(t, err, "stream broke")
}
