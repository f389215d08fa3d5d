package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A connection keeps a big read buffer only after login, and only while
// its frames fill a quarter of it.
func TestKeepReadBuffer(t *testing.T) {
	require.True(t, keepReadBuffer(make([]byte, 10, 1<<20), false))
	require.False(t, keepReadBuffer(make([]byte, 5<<20, 8<<20), false), "before login nothing big is kept")
	require.True(t, keepReadBuffer(make([]byte, 5<<20, 8<<20), true))
	require.False(t, keepReadBuffer(make([]byte, 1<<20, 8<<20), true), "a quarter full: let it go")
	require.False(t, keepReadBuffer(make([]byte, maxKeptReadBuffer+1), true))
}
