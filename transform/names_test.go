package transform

import (
	"sort"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

// The config accepts exactly the transforms this package builds.
func TestNamesMatchConfig(t *testing.T) {
	t.Parallel()
	want := append([]string(nil), config.TransformNames...)
	sort.Strings(want)
	require.Equal(t, want, Names())
	for alias, name := range config.TransformAliases {
		require.Equal(t, name, aliases[alias])
	}
}
