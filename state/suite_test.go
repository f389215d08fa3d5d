package state_test

import (
	"testing"

	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/state/statetest"
)

func TestFileStoreSuite(t *testing.T) {
	t.Parallel()
	statetest.Run(t, state.OpenTestFileStoreForSuite)
}

func TestHTTPStoreSuite(t *testing.T) {
	t.Parallel()
	statetest.Run(t, state.OpenTestHTTPStoreForSuite)
}
