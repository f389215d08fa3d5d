package live

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	published := map[Key]fingerprint{
		{Name: "b"}:                      sha256.Sum256([]byte("1")),
		{Name: "a"}:                      sha256.Sum256([]byte("2")),
		{Name: "a", Binary: true}:        sha256.Sum256([]byte("3")),
		{Name: "\x00\xff", Binary: true}: sha256.Sum256([]byte("4")),
	}
	ident := targetState{Server: "h:1", Stream: "s", Topic: "t", Partition: 3}
	blob, err := encodeState(ident, published)
	require.NoError(t, err)
	st, got, err := decodeState(blob)
	require.NoError(t, err)
	require.Equal(t, published, got)
	require.Equal(t, targetState{Format: stateFormat, Server: "h:1", Stream: "s", Topic: "t", Partition: 3}, st)
	again, err := encodeState(ident, got)
	require.NoError(t, err)
	require.Equal(t, string(blob), string(again), "the encoding is deterministic")
}

func TestStateDecodeErrors(t *testing.T) {
	t.Parallel()
	hash := `"` + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" + `"`
	for i, tc := range []struct{ blob, want string }{
		{`{`, "unexpected end"},
		{`{"format":2}`, "format 2"},
		{`{"format":1,"keys":[{"sha256":` + hash + `}]}`, "exactly one of key and bin"},
		{`{"format":1,"keys":[{"key":"a","bin":"YQ==","sha256":` + hash + `}]}`, "exactly one of key and bin"},
		{`{"format":1,"keys":[{"key":"a","sha256":"AA=="}]}`, "sha256 is 1 bytes"},
		{`{"format":1,"keys":[{"key":"a","sha256":` + hash + `},{"key":"a","sha256":` + hash + `}]}`, "appears twice"},
		{`{"format":1,"keys":[{"key":"\ud800","sha256":` + hash + `}]}`, ""},
	} {
		_, _, err := decodeState([]byte(tc.blob))
		if tc.want == "" {
			continue // accepted or not, it must not panic
		}
		require.ErrorIs(t, err, ErrCorruptState, "case %d", i)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	st, published, err := decodeState(nil)
	require.NoError(t, err)
	require.Empty(t, published)
	require.Zero(t, st)
}

func FuzzDecodeState(f *testing.F) {
	blob, err := encodeState(targetState{Stream: "s", Topic: "t"}, map[Key]fingerprint{
		{Name: "k"}: {}, {Name: "k", Binary: true}: {1},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(blob)
	f.Add([]byte(`{"format":1,"keys":[]}`))
	f.Add([]byte(`{"format":1,"keys":[{"key":"a","sha256":"AA=="}]}`))
	f.Add([]byte(``))
	f.Add(blob[:len(blob)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		st, published, err := decodeState(b)
		if err != nil {
			return
		}
		for k := range published {
			if err := checkKey(k); err != nil {
				t.Fatalf("decoded an invalid key %q: %v", k.Name, err)
			}
		}
		again, err := encodeState(st, published)
		if err != nil {
			t.Fatal(err)
		}
		st2, published2, err := decodeState(again)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if len(published2) != len(published) || st2.Stream != st.Stream || st2.Topic != st.Topic || st2.Partition != st.Partition {
			t.Fatalf("round trip changed the state")
		}
		for k, fp := range published {
			if published2[k] != fp {
				t.Fatalf("round trip changed key %q", k.Name)
			}
		}
	})
}
