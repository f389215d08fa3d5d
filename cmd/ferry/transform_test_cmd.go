package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/internal/units"
	"github.com/ferryhq/ferry/transform/wasm"
	"github.com/ferryhq/ferry/transform/wasm/abi"
	"github.com/spf13/cobra"
)

// newTransformCmd is `ferry transform`, with `ferry transform test`.
func newTransformCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "transform", Short: "Try transforms outside a pipeline"}
	cmd.AddCommand(newTransformTestCmd())
	return cmd
}

// newTransformTestCmd is `ferry transform test MODULE.wasm < in.ndjson`:
// each line of standard input is one message's payload; the module is
// called once per batch of lines, as the runtime calls it, and what it
// does to each line is printed.
func newTransformTestCmd() *cobra.Command {
	var (
		cfgArg, function string
		timeout          time.Duration
		memLimit         string
		allowClock       bool
		batch            int
	)
	cmd := &cobra.Command{
		Use:   "test MODULE.wasm|PLUGIN",
		Short: "Run a WebAssembly transform or a transform plugin on NDJSON lines from standard input and print its verdict for each",
		Long: `Run a WebAssembly transform module on standard input, one message
payload per line, and print what the module does to each line:

  3: keep
  4: drop
  5: replace {"n":5,"via":"wasm"}
  6: split into 2
       {"n":6,"part":1}
       {"n":6,"part":2}
  7: route to topic other
  8: fail: <the module's reason>
  9: error: <why the call failed: a trap, the timeout, the memory limit>

The module runs as in [transforms.wasm]: sandboxed, with the same limits.
Its log calls go to standard error, its counters are printed at the end.
--config is the config table, as inline JSON or a .json or .toml file.
The exit status is 1 when a call failed.

PLUGIN (a ferry-plugin.toml, its directory or an executable) is a transform
plugin (docs/plugins.md), run as [transforms.plugin] runs it; --config is
then checked against its spec, and the other flags but --batch do not
apply.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isWasm(args[0]) {
				return transformPluginTest(cmd, args[0], cfgArg, max(batch, 1))
			}
			code, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			cfgJSON, err := transformConfig(cfgArg)
			if err != nil {
				return fmt.Errorf("--config: %w", err)
			}
			limit, err := units.ParseSize(memLimit)
			if err != nil {
				return fmt.Errorf("--memory-limit: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
			mod, err := wasm.New(cmd.Context(), code, wasm.Config{Function: function, Config: cfgJSON, Timeout: timeout,
				MemoryLimit: int64(limit), AllowClock: allowClock, Logger: log})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			defer mod.Close(context.WithoutCancel(cmd.Context()))
			failed, err := runTransformTest(cmd.Context(), mod, cmd.InOrStdin(), cmd.OutOrStdout(), max(batch, 1))
			if err != nil {
				return err
			}
			counters := mod.Counters()
			names := make([]string, 0, len(counters))
			for n := range counters {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(cmd.ErrOrStderr(), "counter %s = %d\n", n, counters[n])
			}
			if failed > 0 {
				return fmt.Errorf("%d call(s) of the module failed", failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgArg, "config", "", "the module's config: a JSON object, or a .json or .toml file")
	f.StringVar(&function, "function", wasm.DefaultFunction, "the exported function to call")
	f.DurationVar(&timeout, "timeout", wasm.DefaultTimeout, "the longest one call may run")
	f.StringVar(&memLimit, "memory-limit", "64MiB", "the most memory the module may have")
	f.BoolVar(&allowClock, "allow-clock", false, "give the module the real clocks")
	f.IntVar(&batch, "batch", 100, "lines per call")
	return cmd
}

// runTransformTest feeds in to mod in batches of n lines and prints the
// verdicts; it returns how many calls failed.
func runTransformTest(ctx context.Context, mod *wasm.Module, in io.Reader, out io.Writer, n int) (int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	w := bufio.NewWriter(out)
	defer w.Flush()
	failed, line := 0, 0
	var msgs []abi.Message
	var lines []int
	flush := func() {
		if len(msgs) == 0 {
			return
		}
		vs, err := mod.Call(ctx, msgs)
		if err != nil {
			failed++
			for _, l := range lines {
				fmt.Fprintf(w, "%d: error: %v\n", l, err)
			}
		}
		for i, v := range vs {
			printVerdict(w, lines[i], v)
		}
		msgs, lines = msgs[:0], lines[:0]
	}
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		msgs = append(msgs, abi.Message{Payload: append([]byte(nil), sc.Bytes()...)})
		lines = append(lines, line)
		if len(msgs) == n {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		return failed, fmt.Errorf("read standard input: %w", err)
	}
	flush()
	return failed, ctx.Err()
}

func printVerdict(w io.Writer, line int, v abi.Verdict) {
	switch v.Action {
	case abi.Keep, abi.Drop:
		fmt.Fprintf(w, "%d: %s\n", line, v.Action)
	case abi.Replace:
		fmt.Fprintf(w, "%d: replace %s%s\n", line, v.Messages[0].Payload, extras(v.Messages[0]))
	case abi.Split:
		fmt.Fprintf(w, "%d: split into %d\n", line, len(v.Messages))
		for _, m := range v.Messages {
			fmt.Fprintf(w, "     %s%s\n", m.Payload, extras(m))
		}
	case abi.Route:
		fmt.Fprintf(w, "%d: route to topic %s\n", line, v.Topic)
	case abi.Fail:
		fmt.Fprintf(w, "%d: fail: %s\n", line, v.Reason)
	}
}

// extras names a message's key, timestamp and headers, when it has any.
func extras(m abi.Message) string {
	var parts []string
	if len(m.Key) > 0 {
		parts = append(parts, "key="+strconv.Quote(string(m.Key)))
	}
	if m.Timestamp != 0 {
		parts = append(parts, "timestamp="+time.UnixMicro(m.Timestamp).UTC().Format(time.RFC3339Nano))
	}
	for _, h := range m.Headers {
		parts = append(parts, fmt.Sprintf("%s=%s", strconv.Quote(string(h.Key)), strconv.Quote(string(h.Value))))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  (" + strings.Join(parts, " ") + ")"
}

// transformConfig is --config as JSON: inline JSON, or a .json or .toml
// file.
func transformConfig(arg string) ([]byte, error) {
	arg = strings.TrimSpace(arg)
	if arg == "" {
		return []byte("{}"), nil
	}
	var v map[string]any
	if strings.HasPrefix(arg, "{") {
		if err := json.Unmarshal([]byte(arg), &v); err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(arg, ".toml") {
		if err := toml.Unmarshal(b, &v); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
