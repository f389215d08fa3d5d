package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
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

func TestPluginConfigDecode(t *testing.T) {
	t.Parallel()
	type cfg struct {
		Interval Duration `json:"interval"`
		MaxCount *int     `json:"max_count"`
		Range    []int    `json:"messages_range"`
		Name     string   `json:"name"`
	}
	p := PluginConfig{Source: "connectors/random.toml", Values: map[string]any{
		"interval": "1h 30m", "max_count": int64(5), "messages_range": []any{int64(1), int64(2)},
	}}
	var c cfg
	require.NoError(t, p.Decode(&c))
	require.Equal(t, 90*time.Minute, c.Interval.D())
	require.Equal(t, 5, *c.MaxCount)
	require.Equal(t, []int{1, 2}, c.Range)

	p.Values = map[string]any{"intervall": "1s"}
	err := p.Decode(&c)
	require.ErrorContains(t, err, "connectors/random.toml: plugin_config.intervall is not a setting")

	p.Values = map[string]any{"max_count": "many"}
	require.ErrorContains(t, p.Decode(&c), "plugin_config.max_count is string, want int")

	p.Values = map[string]any{"interval": "soon"}
	require.ErrorContains(t, p.Decode(&c), "soon")

	p.Values = map[string]any{"interval": int64(250)}
	require.NoError(t, p.Decode(&c))
	require.Equal(t, 250*time.Millisecond, c.Interval.D())
	require.ErrorContains(t, p.Required("url", ""), "plugin_config.url is required")
}

func TestMessageHeadersAndErrors(t *testing.T) {
	t.Parallel()
	var m Message
	m.SetHeader("a", wire.StringValue("1"))
	m.SetHeader("a", wire.StringValue("2"))
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
