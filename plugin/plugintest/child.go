package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/host"
)

// RunChildIfAsked runs the conformance suite and exits when this process
// is Run's child; otherwise it returns at once. Call it from an init
// function of the executable (before package testing or a command line
// parses os.Args).
func RunChildIfAsked() {
	spec, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	os.Unsetenv(childEnv)
	var o Options
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		fmt.Fprintln(os.Stderr, childEnv+":", err)
		os.Exit(2)
	}
	args := []string{os.Args[0]}
	for _, a := range os.Args[1:] {
		if len(a) > 6 && a[:6] == "-test." {
			args = append(args, a)
		}
	}
	os.Args = args
	tests := []testing.InternalTest{{Name: "Sink", F: o.sinkSuite}}
	if o.Kind == plugin.KindSource {
		tests = []testing.InternalTest{{Name: "Source", F: o.sourceSuite}}
	}
	os.Exit(testing.MainStart(deps{}, tests, nil, nil, nil).Run())
}

// info resolves the plugin as a connector of the options' kind.
func (o Options) info(t *testing.T) connector.Info {
	m, _, err := host.Find(o.Path, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := host.Describe(m)
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info(connector.Kind(o.Kind))
	if err := info.Spec.Check(o.config().Plugin); err != nil {
		t.Fatalf("the plugin's settings refuse --config: %v", err)
	}
	return info
}

type pider interface{ PID() int }

func (o Options) sinkSuite(t *testing.T) {
	info := o.info(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before, err := o.readOutput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// read is what the external system holds beyond what it held before.
	read := func(t *testing.T) []string {
		t.Helper()
		all, err := o.readOutput(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) < len(before) || !slices.Equal(all[:len(before)], before) {
			t.Fatalf("the external system no longer holds what it held before the test (%d lines)", len(before))
		}
		return all[len(before):]
	}
	newSink := func(t *testing.T) connector.Sink {
		snk, err := info.NewSink(o.config())
		if err != nil {
			t.Fatal(err)
		}
		return snk
	}
	var poison []byte
	if o.Poison != "" {
		poison = []byte(o.Poison)
	}
	connectortest.Sink(t, connectortest.SinkSuite{New: newSink, Read: read, Idempotent: o.Idempotent, Poison: poison})
	t.Run("a crash in the middle of a batch, and the replay", func(t *testing.T) {
		snk := newSink(t)
		if err := snk.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer snk.Close(context.Background())
		p, ok := snk.(pider)
		if !ok {
			t.Skip("not a plugin process")
		}
		held := len(read(t))
		b := &connector.SinkBatch{Stream: "conformance", Topic: "crash", Schema: connector.SchemaJSON}
		for i := range 200 {
			var id [16]byte
			id[0], id[1], id[15] = 0xcc, byte(i>>8), byte(i)
			b.Messages = append(b.Messages, connector.Message{ID: id, Offset: uint64(10_000 + i), Timestamp: time.Now().UTC(),
				Payload: fmt.Appendf(nil, `{"crash":%d,"text":"replayed after a kill"}`, i)})
		}
		done := make(chan error, 1)
		pid := p.PID()
		go func() { done <- snk.Consume(ctx, b) }()
		var first error
		returned := false
		waitFor(func() bool {
			select {
			case first = <-done:
				returned = true
				return true
			default:
				return len(read(t)) > held
			}
		})
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
		if !returned {
			select {
			case first = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Consume did not return within a minute of its plugin's kill -9")
			}
		}
		if first == nil {
			t.Log("the batch was written before the kill; the next batch must start a new process")
		} else if !connector.IsUnavailable(first) {
			t.Fatalf("Consume whose plugin was killed failed with %v; want it marked unavailable (nothing dead-lettered, the batch kept)", first)
		} else {
			t.Logf("killed in the middle of the batch: %v", first)
		}
		// Delivered again as the runtime does: while the sink is
		// unavailable (a first call may find the dead process), a few times.
		var err error
		for range 3 {
			if err = snk.Consume(ctx, b); err == nil || !connector.IsUnavailable(err) {
				break
			}
		}
		if err != nil {
			t.Fatalf("the batch delivered again, to a new process: %v", err)
		}
		got := read(t)[held:]
		counts := map[string]int{}
		for _, l := range got {
			counts[l]++
		}
		for _, m := range b.Messages {
			if counts[string(m.Payload)] == 0 {
				t.Fatalf("%s was lost: after the kill and the replay the external system holds %d of the %d messages", m.Payload, len(counts), len(b.Messages))
			}
		}
		if extra := len(got) - len(b.Messages); extra > len(b.Messages) {
			t.Fatalf("%d messages written twice or more: more than the batch", extra)
		}
		t.Logf("nothing lost; %d written twice (the part written before the kill)", len(got)-len(b.Messages))
	})
}

func (o Options) sourceSuite(t *testing.T) {
	info := o.info(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	add := func(t *testing.T, n int) []string {
		t.Helper()
		got, err := o.add(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	newSource := func(t *testing.T) connector.Source {
		src, err := info.NewSource(o.config())
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	connectortest.Source(t, connectortest.SourceSuite{New: newSource, Add: add, StableIDs: o.StableIDs})
	t.Run("a crash in the middle of a batch, and the replay", func(t *testing.T) {
		open := func(state []byte) connector.Source {
			src := newSource(t)
			if err := src.Open(ctx, state); err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { src.Close(context.Background()) })
			return src
		}
		ack := func(src connector.Source, b *connector.Batch) {
			if a, ok := src.(connector.Acker); ok {
				if err := a.Ack(ctx, b); err != nil {
					t.Fatalf("Ack: %v", err)
				}
			}
		}
		first := open(nil)
		for { // what earlier checks added
			pctx, stop := context.WithTimeout(ctx, time.Second)
			b, err := first.Poll(pctx)
			stop()
			if err != nil || len(b.Messages) == 0 {
				break
			}
			ack(first, b)
		}
		want := add(t, 12)
		b1 := poll(t, ctx, first)
		ack(first, b1)
		want = append(want, add(t, 12)...)
		b2 := poll(t, ctx, first) // in flight, never acknowledged: then the crash
		p, ok := first.(pider)
		if !ok || p.PID() == 0 {
			t.Skip("not a plugin process")
		}
		if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if b, err := first.Poll(ctx); err == nil {
			t.Fatalf("Poll after its plugin's kill -9 returned a batch of %d", len(b.Messages))
		} else {
			t.Logf("Poll after the kill: %v", err)
		}
		if b1.State == nil {
			t.Fatal("the acknowledged batch carried no state")
		}
		again := open(b1.State)
		rest := want[len(b1.Messages):]
		var got []connector.Message
		for len(got) < len(rest) {
			b := poll(t, ctx, again)
			got = append(got, b.Messages...)
			ack(again, b)
		}
		texts := make([]string, len(got))
		for i, m := range got {
			texts[i] = string(m.Payload)
		}
		if !slices.Equal(texts[:len(rest)], rest) {
			t.Fatalf("restarted from the state of the acknowledged batch, the source sent %q; want %q (the batch in flight at the kill, then the rest)", texts, rest)
		}
		if o.StableIDs {
			for i, m := range b2.Messages {
				if got[i].ID != m.ID {
					t.Fatalf("message %d of the replayed batch has id %x; it had %x before the kill", i, got[i].ID, m.ID)
				}
			}
		}
		t.Logf("the batch in flight (%d messages) came again after the kill; nothing lost", len(b2.Messages))
	})
}

func poll(t *testing.T, ctx context.Context, src connector.Source) *connector.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		b, err := src.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if len(b.Messages) > 0 {
			return b
		}
	}
}

// waitFor polls cond for at most a minute.
func waitFor(cond func() bool) {
	deadline := time.Now().Add(time.Minute)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// deps is the least package testing needs to run tests: no profiles, no
// fuzzing, no coverage.
type deps struct{}

var errNotSupported = errors.New("not supported by ferry plugin test")

func (deps) ImportPath() string { return "ferry plugin test" }
func (deps) ModulePath() string { return "" }
func (deps) MatchString(pat, str string) (bool, error) {
	re, err := regexp.Compile(pat)
	if err != nil {
		return false, err
	}
	return re.MatchString(str), nil
}
func (deps) SetPanicOnExit0(bool)                        {}
func (deps) StartCPUProfile(io.Writer) error             { return errNotSupported }
func (deps) StopCPUProfile()                             {}
func (deps) StartTestLog(io.Writer)                      {}
func (deps) StopTestLog() error                          { return nil }
func (deps) WriteProfileTo(string, io.Writer, int) error { return errNotSupported }
func (deps) CoordinateFuzzing(time.Duration, int64, time.Duration, int64, int, []corpusEntry, []reflect.Type, string, string) error {
	return errNotSupported
}
func (deps) RunFuzzWorker(func(corpusEntry) error) error { return errNotSupported }
func (deps) ReadCorpus(string, []reflect.Type) ([]corpusEntry, error) {
	return nil, errNotSupported
}
func (deps) CheckCorpus([]any, []reflect.Type) error { return nil }
func (deps) ResetCoverage()                          {}
func (deps) SnapshotCoverage()                       {}
func (deps) InitRuntimeCoverage() (string, func(string, string) (string, error), func() float64) {
	return "", nil, nil
}

// corpusEntry is package testing's (an alias of an unnamed struct type,
// so this one is the same type).
type corpusEntry = struct {
	Parent     string
	Path       string
	Data       []byte
	Values     []any
	Generation int
	IsSeed     bool
}
