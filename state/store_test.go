package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// openStore returns a fresh, empty store whose Close is registered with
// t.Cleanup.
type openStore func(t *testing.T) Store

// runStoreSuite is the contract every Store must meet.
func runStoreSuite(t *testing.T, open openStore) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"load missing is ErrNotFound", func(t *testing.T, s Store) {
			_, err := s.Load(ctx, "nothing")
			require.ErrorIs(t, err, ErrNotFound)
			require.Contains(t, err.Error(), `"nothing"`)
		}},
		{"create then load", func(t *testing.T, s Store) {
			v, err := s.Save(ctx, "src", []byte("offset=42"), "")
			require.NoError(t, err)
			require.False(t, v.IsZero())
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte("offset=42"), st.Data)
			require.Equal(t, v, st.Version)
		}},
		{"update with the current version", func(t *testing.T, s Store) {
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
			require.Equal(t, State{Data: []byte("three"), Version: v3}, st)
		}},
		{"stale version conflicts and changes nothing", func(t *testing.T, s Store) {
			v1, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			v2, err := s.Save(ctx, "src", []byte("two"), v1)
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("stale"), v1)
			require.ErrorIs(t, err, ErrConflict)
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "src", ce.Key)
			require.Equal(t, v1, ce.Expected)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, State{Data: []byte("two"), Version: v2}, st)
		}},
		{"create when it exists conflicts", func(t *testing.T, s Store) {
			v1, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("again"), "")
			require.ErrorIs(t, err, ErrConflict)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, State{Data: []byte("one"), Version: v1}, st)
		}},
		{"update of a missing key conflicts", func(t *testing.T, s Store) {
			v1, err := s.Save(ctx, "other", []byte("x"), "")
			require.NoError(t, err)
			_, err = s.Save(ctx, "src", []byte("one"), v1)
			require.ErrorIs(t, err, ErrConflict)
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"delete", func(t *testing.T, s Store) {
			_, err := s.Save(ctx, "src", []byte("one"), "")
			require.NoError(t, err)
			require.NoError(t, s.Delete(ctx, "src"))
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, ErrNotFound)
			require.ErrorIs(t, s.Delete(ctx, "src"), ErrNotFound)
			v, err := s.Save(ctx, "src", []byte("reborn"), "")
			require.NoError(t, err)
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, State{Data: []byte("reborn"), Version: v}, st)
		}},
		{"keys are independent", func(t *testing.T, s Store) {
			for i := range 5 {
				_, err := s.Save(ctx, fmt.Sprintf("k%d", i), []byte{byte(i)}, "")
				require.NoError(t, err)
			}
			require.NoError(t, s.Delete(ctx, "k2"))
			for i := range 5 {
				st, err := s.Load(ctx, fmt.Sprintf("k%d", i))
				if i == 2 {
					require.ErrorIs(t, err, ErrNotFound)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, []byte{byte(i)}, st.Data)
			}
		}},
		{"empty and binary data round-trip", func(t *testing.T, s Store) {
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
		{"saved data is not aliased", func(t *testing.T, s Store) {
			buf := []byte("original")
			_, err := s.Save(ctx, "src", buf, "")
			require.NoError(t, err)
			copy(buf, "CHANGED!")
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte("original"), st.Data)
		}},
		{"unicode key", func(t *testing.T, s Store) {
			_, err := s.Save(ctx, "postgres source ü-1", []byte("lsn=0/16B3748"), "")
			require.NoError(t, err)
			st, err := s.Load(ctx, "postgres source ü-1")
			require.NoError(t, err)
			require.Equal(t, []byte("lsn=0/16B3748"), st.Data)
		}},
		{"invalid keys are rejected", func(t *testing.T, s Store) {
			for i, key := range []string{"", "a/b", `a\b`, "..", "../x", ".hidden", "a\x00b", "a\nb", strings.Repeat("k", MaxKeyLen+1)} {
				_, err := s.Load(ctx, key)
				require.ErrorIs(t, err, ErrInvalidKey, "case %d: Load(%q)", i, key)
				_, err = s.Save(ctx, key, []byte("x"), "")
				require.ErrorIs(t, err, ErrInvalidKey, "case %d: Save(%q)", i, key)
				require.ErrorIs(t, s.Delete(ctx, key), ErrInvalidKey, "case %d: Delete(%q)", i, key)
			}
		}},
		{"too large is rejected", func(t *testing.T, s Store) {
			_, err := s.Save(ctx, "big", make([]byte, MaxStateSize+1), "")
			require.ErrorIs(t, err, ErrTooLarge)
			_, err = s.Load(ctx, "big")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"concurrent saves on one version: exactly one wins", func(t *testing.T, s Store) {
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
				require.ErrorIs(t, err, ErrConflict, "save %d", i)
			}
			require.NotEqual(t, -1, winner, "no save succeeded")
			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, []byte{byte(winner)}, st.Data)
		}},
		{"cancelled context", func(t *testing.T, s Store) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := s.Save(cctx, "src", []byte("x"), "")
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Load(cctx, "src")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, s.Delete(cctx, "src"), context.Canceled)
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"close is idempotent and ends use", func(t *testing.T, s Store) {
			_, err := s.Save(ctx, "src", []byte("x"), "")
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
			_, err = s.Load(ctx, "src")
			require.ErrorIs(t, err, ErrClosed)
			_, err = s.Save(ctx, "src", []byte("y"), "")
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, s.Delete(ctx, "src"), ErrClosed)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

func TestFileStoreSuite(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, func(t *testing.T) Store { return openTestFileStore(t, t.TempDir()) })
}

func TestHTTPStoreSuite(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, func(t *testing.T) Store {
		srv := newStateServer(t)
		return newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth))
	})
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key    string
		reason string // substring of the error; "" = valid
	}{
		{"postgres", ""},
		{"random_source-1", ""},
		{"a.b", ""},
		{"with space", ""},
		{"ünïcode", ""},
		{strings.Repeat("k", MaxKeyLen), ""},
		{"", "empty"},
		{strings.Repeat("k", MaxKeyLen+1), "201 bytes long"},
		{"a/b", "path separator '/'"},
		{`a\b`, `path separator '\\'`},
		{"..", `contains ".."`},
		{"a..b", `contains ".."`},
		{".", `starts with "."`},
		{".tmp-x", `starts with "."`},
		{"a\x00b", "control character U+0000 at byte 1"},
		{"a\tb", "control character U+0009"},
		{"a\x7f", "control character U+007F"},
		{"a\u0085", "control character U+0085"},
		{"a:b", `contains ':'`},
		{"a*b", `contains '*'`},
		{" a", "space"},
		{"a ", "space"},
		{"\xff", "UTF-8"},
	}
	for i, tc := range tests {
		err := ValidateKey(tc.key)
		if tc.reason == "" {
			require.NoError(t, err, "case %d: %q", i, tc.key)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidKey, "case %d: %q", i, tc.key)
		require.Contains(t, err.Error(), tc.reason, "case %d: %q", i, tc.key)
		var ke *KeyError
		require.ErrorAs(t, err, &ke, "case %d", i)
		require.Equal(t, tc.key, ke.Key, "case %d", i)
	}
}

func TestConflictErrorMessage(t *testing.T) {
	t.Parallel()
	err := error(&ConflictError{Key: "src", Expected: "3", Actual: "4"})
	require.EqualError(t, err, `state "src": version conflict: expected 3, stored 4`)
	require.True(t, errors.Is(err, ErrConflict))
	require.EqualError(t, &ConflictError{Key: "src"}, `state "src": version conflict: expected none`)
}
