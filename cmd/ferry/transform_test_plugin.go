package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/host"
	"github.com/ferryhq/ferry/transform"
)

// isWasm reports whether path names a WebAssembly module: a .wasm name,
// or a file that starts with the module magic.
func isWasm(path string) bool {
	if strings.HasSuffix(path, ".wasm") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	return bytes.Equal(head[:n], []byte("\x00asm"))
}

// transformPluginTest is `ferry transform test PLUGIN`: the plugin's
// Apply once per batch of lines, and its verdict for each line.
func transformPluginTest(cmd *cobra.Command, path, cfgArg string, batch int) error {
	cfgJSON, err := transformConfig(cfgArg)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	bt, err := host.BuildTransform(abs, cfg, "--config")
	if err != nil {
		return err
	}
	defer transform.Chain{bt}.Close()
	sc := bufio.NewScanner(cmd.InOrStdin())
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	failed, line := 0, 0
	var msgs []connector.Message
	var lines []int
	flush := func() {
		if len(msgs) == 0 {
			return
		}
		outs, err := bt.ApplyBatch(cmd.Context(), msgs, connector.SchemaJSON)
		if err != nil {
			failed++
			for _, l := range lines {
				fmt.Fprintf(w, "%d: error: %v\n", l, err)
			}
		}
		for i, o := range outs {
			printOutcome(w, lines[i], o)
		}
		msgs, lines = msgs[:0], lines[:0]
	}
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		msgs = append(msgs, connector.Message{Payload: append([]byte(nil), sc.Bytes()...)})
		lines = append(lines, line)
		if len(msgs) == batch {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read standard input: %w", err)
	}
	flush()
	if failed > 0 {
		return fmt.Errorf("%d call(s) of the plugin failed", failed)
	}
	return nil
}

// printOutcome prints what a transform made of one line, as printVerdict
// does for a module's verdict.
func printOutcome(w io.Writer, line int, o transform.Outcome) {
	switch {
	case o.Err != nil:
		fmt.Fprintf(w, "%d: fail: %v\n", line, o.Err)
	case o.Keep:
		fmt.Fprintf(w, "%d: keep\n", line)
	case len(o.Out) == 0:
		fmt.Fprintf(w, "%d: drop\n", line)
	case len(o.Out) == 1:
		fmt.Fprintf(w, "%d: replace %s\n", line, o.Out[0].Payload)
	default:
		fmt.Fprintf(w, "%d: split into %d\n", line, len(o.Out))
		for _, m := range o.Out {
			fmt.Fprintf(w, "     %s\n", m.Payload)
		}
	}
}
