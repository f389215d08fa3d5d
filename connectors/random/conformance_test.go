package random

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := New(connector.Config{Key: "random", Plugin: connector.PluginConfig{Source: "random.toml", Values: map[string]any{
				"interval": "1ms", "max_count": int64(57), "messages_range": []any{int64(1), int64(10)}}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Synthetic: 57,
	})
}
