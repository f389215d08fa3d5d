package didyoumean

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	keys := []string{"linger_time", "batch_length", "timeout", "url"}
	for i, tc := range []struct{ in, want string }{
		{"lingr_time", "linger_time"}, {"TIMEOUT", "timeout"}, {"timeou", "timeout"},
		{"batch", "batch_length"}, {"uri", "url"}, {"length", "batch_length"}, {"zzzzzzzz", ""},
	} {
		require.Equal(t, tc.want, Closest(tc.in, keys), "case %d", i)
	}
}
