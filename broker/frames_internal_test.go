package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Large reply frames come back from their pool by size class, and a
// buffer of another size is not pooled.
func TestLargeFramePoolClasses(t *testing.T) {
	for _, c := range []struct{ n, size int }{
		{maxPooledFrame + 1, 2 << 20}, {2 << 20, 2 << 20}, {2<<20 + 1, 4 << 20}, {maxLargeFrame, maxLargeFrame},
	} {
		_, size, ok := largeClass(c.n)
		require.True(t, ok, c.n)
		require.Equal(t, c.size, size, c.n)
		f := getFrame(c.n)
		require.Len(t, f, c.n)
		require.GreaterOrEqual(t, cap(f), c.n)
	}
	_, _, ok := largeClass(maxLargeFrame + 1)
	require.False(t, ok)
	require.Len(t, getFrame(maxLargeFrame+1), maxLargeFrame+1)
	require.True(t, keepReadBuffer(make([]byte, 10, 1<<20), false))
	require.False(t, keepReadBuffer(make([]byte, 5<<20, 8<<20), false), "before login nothing big is kept")
	require.True(t, keepReadBuffer(make([]byte, 5<<20, 8<<20), true))
	require.False(t, keepReadBuffer(make([]byte, 1<<20, 8<<20), true), "a quarter full: let it go")
}
