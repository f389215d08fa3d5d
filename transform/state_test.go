package transform

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChainStateOfAChainWithoutState(t *testing.T) {
	var c Chain
	require.False(t, c.KeepsState())
	require.Nil(t, c.Begin(), "nothing to keep")
	var tx *Tx
	require.NoError(t, tx.Commit())
	tx.Rollback()
	b, err := c.MarshalState()
	require.NoError(t, err)
	require.NoError(t, c.UnmarshalState(b))
	require.Error(t, c.UnmarshalState([]byte("junk")))
}

func FuzzChainUnmarshalState(f *testing.F) {
	f.Add([]byte("FCS1\x00\x04wasm\x05FWS1\x00"))
	f.Add([]byte("FCS1\x07\x04wasm\x99"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = Chain{}.UnmarshalState(b)
	})
}
