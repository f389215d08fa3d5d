package connector

import (
	"context"
	"errors"
	"testing"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

type nopSource struct{}

func (nopSource) Open(context.Context, []byte) error   { return nil }
func (nopSource) Poll(context.Context) (*Batch, error) { return nil, ErrEndOfInput }
func (nopSource) Close(context.Context) error          { return nil }
func newNop(Config) (Source, error)                    { return nopSource{}, nil }

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	require.NoError(t, r.Register(Info{Kind: KindSource, Name: "random", NewSource: newNop}))
	for i, path := range []string{
		"random", "RANDOM", "libiggy_connector_random_source",
		"target/release/libiggy_connector_random_source.so", "iggy_connector_random_source.dylib",
		"iggy-connector-random-source",
	} {
		info, ok := r.Lookup(KindSource, path)
		require.True(t, ok, "case %d: %s", i, path)
		require.Equal(t, "random", info.Name)
	}
	_, ok := r.Lookup(KindSink, "random")
	require.False(t, ok, "kinds are separate")
	_, ok = r.Lookup(KindSource, "postgres")
	require.False(t, ok)

	err := r.Register(Info{Kind: KindSource, Name: "other", Aliases: []string{"libiggy_connector_random_source"}, NewSource: newNop})
	require.ErrorContains(t, err, "taken")
	require.Error(t, r.Register(Info{Kind: KindSource, Name: "x"}), "no constructor")
	require.Error(t, r.Register(Info{Kind: "pipe", Name: "x", NewSource: newNop}))
	require.Len(t, r.List(KindSource), 1)
}

func TestMessageHeadersAndErrors(t *testing.T) {
	t.Parallel()
	var m Message
	m.SetHeader("a", header.StringValue("1"))
	m.SetHeader("a", header.StringValue("2"))
	require.Len(t, m.Headers, 1)
	v, ok := m.Header("a")
	require.True(t, ok)
	require.Equal(t, "2", v.String())

	err := MessageErrors{3: errors.New("bad"), 1: errors.New("worse")}
	require.Equal(t, "2 messages failed; first, message 1: worse", err.Error())
	base := errors.New("rejected")
	p := Permanent(base)
	require.True(t, IsPermanent(p))
	require.ErrorIs(t, p, base)
	require.False(t, IsPermanent(base))
	require.Nil(t, Permanent(nil))
}
