package exec_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// A command that runs and fails is its message's failure; a shell that
// cannot be started at all (its working directory is gone) says the
// destination is unavailable, so the runtime dead-letters nothing.
func TestAShellThatCannotStartIsUnavailable(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.Mkdir(dir, 0o755))
	s := newSink(t, dir, map[string]any{"command": `test "$FERRY_PAYLOAD" != bad`}, nil)
	var per connector.MessageErrors
	require.ErrorAs(t, consume(t, s, batch(0, "good", "bad")), &per)
	require.Len(t, per, 1)
	require.False(t, connector.IsUnavailable(per[1]), "a failing command is the message's failure: %v", per[1])

	require.NoError(t, os.Remove(dir))
	require.ErrorAs(t, consume(t, s, batch(0, "good", "bad")), &per)
	require.Len(t, per, 2)
	for i, err := range per {
		require.True(t, connector.IsUnavailable(err), "message %d: %v", i, err)
		require.ErrorContains(t, err, "start:")
	}
}
