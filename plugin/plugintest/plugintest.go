// Package plugintest runs the connector kit's conformance suites
// (connectortest.Source and connectortest.Sink) against a plugin, from a
// program rather than from `go test`: it is `ferry plugin test`.
//
// The suites are written for package testing, so Run starts the running
// executable again as a child with the options in its environment, and
// the child — which must call RunChildIfAsked before anything else, from
// an init function — runs them through testing.MainStart with a minimal
// set of test dependencies, in verbose mode, and exits. Run reads its
// output and turns it into a report: every check with its result, and
// for each failed check what it said.
//
// Besides the suites, a check of its own crashes the plugin in the middle
// of a batch (SIGKILL to its process) and checks the replay: a sink's
// call fails as unavailable and the batch delivered again is written,
// nothing lost; a source restarted from the state of its last
// acknowledged batch reads the batch in flight again.
package plugintest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/host"
)

// Options say which plugin to test and how to see its external system.
type Options struct {
	// Path names the plugin: a ferry-plugin.toml, its directory or an
	// executable.
	Path string
	// Kind chooses source or sink for a plugin that is both.
	Kind plugin.Kind
	// Config is the plugin_config the plugin is opened with.
	Config map[string]any
	// Read (sink) is a shell command that prints the payloads the
	// external system holds, one a line, in the order written; ReadFile
	// (sink) is a file holding them, one a line. What they hold before
	// the run is ignored.
	Read, ReadFile string
	// Add (source) is a shell command that makes the external system
	// hold $1 (also $N) more records and prints their payloads, one a
	// line, as the source will send them.
	Add string
	// StableIDs (source) and Idempotent (sink) claim what
	// connectortest's suites check only when claimed; Poison (sink) is a
	// payload the sink refuses on its own.
	StableIDs, Idempotent bool
	Poison                string
	// Verbose also prints what passing checks logged.
	Verbose bool
}

// childEnv carries the options to the child process.
const childEnv = "FERRY_PLUGIN_TEST_SUITE"

// ErrFailed is wrapped by Run's error when the plugin failed checks.
var ErrFailed = errors.New("the plugin failed the conformance suite")

// Run runs the conformance suite for o's plugin in a child process,
// writes the report to out, and returns an error wrapping ErrFailed when
// a check failed (or another error when the suite could not run).
func Run(ctx context.Context, o Options, out io.Writer) error {
	m, ok, err := host.Find(o.Path, "")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: no such file", o.Path)
	}
	d, err := host.Describe(m)
	if err != nil {
		return err
	}
	kind, err := chooseKind(d, o.Kind)
	if err != nil {
		return err
	}
	o.Kind = kind
	switch {
	case kind == plugin.KindSink && (o.Read == "") == (o.ReadFile == ""):
		return errors.New("a sink is tested against what its external system holds: give --read CMD or --read-file PATH")
	case kind == plugin.KindSource && o.Add == "":
		return errors.New("a source is tested with records added to its external system: give --add CMD")
	}
	spec, err := json.Marshal(o)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, "-test.v=true", "-test.timeout=15m", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintf(out, "testing %s plugin %s (%s, transport %s)\n", kind, d.Name, where(m), m.Transport)
	rep := report(stdout, out, o.Verbose)
	werr := cmd.Wait()
	if len(rep.failed) > 0 {
		return fmt.Errorf("%w: %s failed %d of the %d checks it ran (see above): %s", ErrFailed, d.Name, len(rep.failed),
			rep.passed+len(rep.failed), strings.Join(rep.failed, "; "))
	}
	if werr != nil {
		return fmt.Errorf("the conformance suite did not finish: %v %s", werr, strings.TrimSpace(stderr.String()))
	}
	fmt.Fprintf(out, "ok: %s passes the %s conformance suite (%d checks passed, %d skipped)\n", d.Name, kind, rep.passed, rep.skipped)
	return nil
}

func chooseKind(d *host.Description, want plugin.Kind) (plugin.Kind, error) {
	var kinds []plugin.Kind
	for _, k := range d.Kinds {
		if k == plugin.KindSource || k == plugin.KindSink {
			kinds = append(kinds, k)
		}
	}
	switch {
	case want != "" && slices.Contains(kinds, want):
		return want, nil
	case want != "":
		return "", fmt.Errorf("%s is not a %s plugin", d.Name, want)
	case len(kinds) == 1:
		return kinds[0], nil
	case len(kinds) == 0:
		return "", fmt.Errorf("%s is neither a source nor a sink: there is no conformance suite for it", d.Name)
	}
	return "", fmt.Errorf("%s is both a source and a sink: say which with --kind", d.Name)
}

func where(m *plugin.Manifest) string {
	if m.File != "" {
		return m.File
	}
	return m.Command
}

type results struct {
	passed, skipped int
	failed          []string // the failed checks' names
}

// report reads `go test -v` output and writes one line per check, with
// what a failed check (or, verbose, any check) logged under it.
func report(r io.Reader, out io.Writer, verbose bool) results {
	var res results
	logs := map[string][]string{} // by test name
	var current string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "=== RUN"), strings.HasPrefix(trimmed, "=== PAUSE"), strings.HasPrefix(trimmed, "=== CONT"):
			current = strings.TrimSpace(trimmed[strings.Index(trimmed[4:], " ")+5:])
		case strings.HasPrefix(trimmed, "--- "):
			f := strings.Fields(trimmed)
			if len(f) < 3 {
				continue
			}
			status, name := strings.TrimSuffix(f[1], ":"), f[2]
			if !strings.Contains(name, "/") {
				continue // the suite as a whole
			}
			check := strings.ReplaceAll(name[strings.Index(name, "/")+1:], "_", " ")
			said := logs[name]
			switch status {
			case "PASS":
				res.passed++
				fmt.Fprintf(out, "  ok    %s\n", check)
			case "SKIP":
				res.skipped++
				fmt.Fprintf(out, "  skip  %s\n", check)
			case "FAIL":
				fmt.Fprintf(out, "  FAIL  %s\n", check)
				res.failed = append(res.failed, check)
			}
			if status != "PASS" || verbose {
				for _, l := range said {
					fmt.Fprintf(out, "          %s\n", l)
				}
			}
		case strings.HasPrefix(line, "    ") && current != "" && trimmed != "":
			// t.Log and t.Fatal output: "    file.go:12: message".
			msg := trimmed
			if i := strings.Index(msg, ": "); i > 0 && strings.Contains(msg[:i], ".go:") {
				msg = msg[i+2:]
			}
			logs[current] = append(logs[current], msg)
		case trimmed == "PASS", trimmed == "FAIL", strings.HasPrefix(trimmed, "ok "), trimmed == "":
		default:
			if strings.HasPrefix(trimmed, "panic:") || strings.HasPrefix(trimmed, "connectortest") {
				res.failed = append(res.failed, trimmed)
			}
			fmt.Fprintf(out, "  %s\n", line)
		}
	}
	return res
}

// a sink's Read and a source's Add, from the options.

func (o Options) readOutput(ctx context.Context) ([]string, error) {
	if o.ReadFile != "" {
		b, err := os.ReadFile(o.ReadFile)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return completeLines(b), nil
	}
	b, err := exec.CommandContext(ctx, "sh", "-c", o.Read).Output()
	if err != nil {
		return nil, fmt.Errorf("--read %q: %v%s", o.Read, err, exitText(err))
	}
	return completeLines(b), nil
}

func (o Options) add(ctx context.Context, n int) ([]string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", o.Add, "sh", fmt.Sprint(n))
	cmd.Env = append(os.Environ(), fmt.Sprintf("N=%d", n))
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("--add %q: %v%s", o.Add, err, exitText(err))
	}
	got := completeLines(b)
	if len(got) != n {
		return nil, fmt.Errorf("--add %q was asked for %d records and printed %d lines", o.Add, n, len(got))
	}
	return got, nil
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func completeLines(b []byte) []string {
	s := string(b)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(s[:i], "\n")
}

// config is the connector.Config the plugin is built with.
func (o Options) config() connector.Config {
	return connector.Config{Key: "plugin-test", Name: "ferry plugin test",
		Plugin: connector.PluginConfig{Values: o.Config, Source: "--config"}}
}
