package exec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/exec"
	"github.com/ferryhq/ferry/connectortest"
)

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			// A command that refuses one kind of record, as a script
			// checking its input would.
			s, err := exec.New(connector.Config{Key: "hook-conformance", Plugin: connector.PluginConfig{Source: "hook.toml", Values: map[string]any{
				"command":     `case {payload} in *refused*) exit 3;; esac; printf '%s\n' {payload} >> ` + out,
				"working_dir": dir}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Read: func(t *testing.T) []string {
			data, err := os.ReadFile(out)
			if os.IsNotExist(err) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		},
		Poison: []byte(`{"note":"refused by the command"}`),
	})
}
