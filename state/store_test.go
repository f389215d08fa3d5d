package state

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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
