// Package statetest is the contract every state.Store must meet, as a
// test suite each store's tests run (the file, HTTP and Iggy stores).
package statetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/state"
)

// Open returns a fresh, empty store whose Close is registered with
// t.Cleanup.
type Open func(t *testing.T) state.Store

// Run checks the contract every state.Store must meet, each case on a
// fresh store from open, in parallel.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s state.Store)
	}{
		{"load missing is state.ErrNotFound", func(t *testing.T, s state.Store) {
			_, err := s.Load(ctx, "nothing")
			require.ErrorIs(t, err, state.ErrNotFound)
			require.Contains(t, err.Error(), `"nothing"`)
		}},
		{"create then load", func(t *testing.T, s state.Store) {
			v, err := s.Save(ctx, "src", []byte("offset=42"), "")
			require.NoError(t, err)
			require.False(t, v.IsZero())
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte("offset=42"), st.Data)
			require.Equal(t, v, st.Version)
		}},
		{"update with the current version", func(t *testing.T, s state.Store) {
			v1, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			v2, err := s.Save(ctx, "src", []byte("two"), v1)
			require.NoError(t, err)
			require.NotEqual(t, v1, v2)
			v3, err := s.Save(ctx, "src", []byte("three"), v2)
			require.NoError(t, err)
			require.NotEqual(t, v2, v3)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, state.State{Data: []byte("three"), Version: v3}, st)
		}},
		{"stale version conflicts and changes nothing", func(t *testing.T, s state.Store) {
			v1, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			v2, err := s.Save(ctx, "src", []byte("two"), v1)
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("stale"), v1)
			require.ErrorIs(t, err, state.ErrConflict)
			var ce *state.ConflictError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "src", ce.Key)
			require.Equal(t, v1, ce.Expected)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, state.State{Data: []byte("two"), Version: v2}, st)
		}},
		{"create when it exists conflicts", func(t *testing.T, s state.Store) {
			v1, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("again"), "")
			require.ErrorIs(t, err, state.ErrConflict)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, state.State{Data: []byte("one"), Version: v1}, st)
		}},
		{"update of a missing key conflicts", func(t *testing.T, s state.Store) {
			v1, err := s.Save(ctx, "other", []byte("x"), "")
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("one"), v1)
			require.ErrorIs(t, err, state.ErrConflict)
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, state.ErrNotFound)
		}},
		{"delete", func(t *testing.T, s state.Store) {
			_, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			require.NoError(t, s.Delete(ctx, "src"))
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, state.ErrNotFound)
			require.ErrorIs(t, s.Delete(ctx, "src"), state.ErrNotFound)
			v, err := s.Save(ctx, "src", []byte("reborn"), "")
			require.NoError(t, err)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, state.State{Data: []byte("reborn"), Version: v}, st)
		}},
		{"keys are independent", func(t *testing.T, s state.Store) {
			for i := range 5 {
				_, err := s.Save(ctx, fmt.Sprintf("k%d", i), []byte{byte(i)}, "")
				require.NoError(t, err)
			}
			require.NoError(t, s.Delete(ctx, "k2"))
			for i := range 5 {
				st, err := s.Load(ctx, fmt.Sprintf("k%d", i))
				if i == 2 {
					require.ErrorIs(t, err, state.ErrNotFound)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, []byte{byte(i)}, st.Data)
			}
		}},
		{"empty and binary data round-trip", func(t *testing.T, s state.Store) {
			v, err := s.Save(ctx, "empty", nil, "")
			require.NoError(t, err)
			st, err := s.Load(ctx, "empty")
			require.NoError(t, err)
			require.Empty(t, st.Data)
			require.Equal(t, v, st.Version)

			all := make([]byte, 512)
			for i := range all {
				all[i] = byte(i)
			}
			_, err = s.Save(ctx, "binary", all, "")
			require.NoError(t, err)
			st, err = s.Load(ctx, "binary")
			require.NoError(t, err)
			require.Equal(t, all, st.Data)
		}},
		{"saved data is not aliased", func(t *testing.T, s state.Store) {
			buf := []byte("original")
			_, err := s.Save(ctx, "src", buf, "")
			require.NoError(t, err)
			copy(buf, "CHANGED!")
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte("original"), st.Data)
		}},
		{"unicode key", func(t *testing.T, s state.Store) {
			_, err := s.Save(ctx, "postgres source ü-1", []byte("lsn=0/16B3748"), "")
			require.NoError(t, err)
			st, err := s.Load(ctx, "postgres source ü-1")
			require.NoError(t, err)
			require.Equal(t, []byte("lsn=0/16B3748"), st.Data)
		}},
		{"invalid keys are rejected", func(t *testing.T, s state.Store) {
			for i, key := range []string{"", "a/b", `a\b`, "..", "../x", ".hidden", "a\x00b", "a\nb", strings.Repeat("k", state.MaxKeyLen+1)} {
				_, err := s.Load(ctx, key)
				require.ErrorIs(t, err, state.ErrInvalidKey, "case %d: Load(%q)", i, key)
				_, err = s.Save(ctx, key, []byte("x"), "")
				require.ErrorIs(t, err, state.ErrInvalidKey, "case %d: Save(%q)", i, key)
				require.ErrorIs(t, s.Delete(ctx, key), state.ErrInvalidKey, "case %d: Delete(%q)", i, key)
			}
		}},
		{"too large is rejected", func(t *testing.T, s state.Store) {
			_, err := s.Save(ctx, "big", make([]byte, state.MaxStateSize+1), "")
			require.ErrorIs(t, err, state.ErrTooLarge)
			_, err = s.Load(ctx, "big")
			require.ErrorIs(t, err, state.ErrNotFound)
		}},
		{"concurrent saves on one version: exactly one wins", func(t *testing.T, s state.Store) {
			v0, err := s.Save(ctx, "src", []byte("base"), "")
			require.NoError(t, err)
			const n = 8
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() { _, errs[i] = s.Save(ctx, "src", []byte{byte(i)}, v0) })
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, winner, "two saves on one version succeeded")
					winner = i
					continue
				}
				require.ErrorIs(t, err, state.ErrConflict, "save %d", i)
			}
			require.NotEqual(t, -1, winner, "no save succeeded")
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte{byte(winner)}, st.Data)
		}},
		{"cancelled context", func(t *testing.T, s state.Store) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := s.Save(cctx, "src", []byte("x"), "")
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Load(cctx, "src")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, s.Delete(cctx, "src"), context.Canceled)
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, state.ErrNotFound)
		}},
		{"close is idempotent and ends use", func(t *testing.T, s state.Store) {
			_, err := s.Save(ctx, "src", []byte("x"), "")
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, state.ErrClosed)
			_, err = s.Save(ctx, "src", []byte("y"), "")
			require.ErrorIs(t, err, state.ErrClosed)
			require.ErrorIs(t, s.Delete(ctx, "src"), state.ErrClosed)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}
