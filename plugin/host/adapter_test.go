package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
)

func sinkConfig(t *testing.T, values map[string]any) connector.Config {
	return connector.Config{Key: "k", Name: "test", Plugin: connector.PluginConfig{Values: values}}
}

func TestSinkAdapterWritesAndReportsPermanentFailures(t *testing.T) {
	bin := build(t, "examples/plugins/go-sink")
	m := manifest(t, "go-sink", "sink", bin, nil, "")
	info, ok, err := registry().Resolve(connector.KindSink, m, "")
	if err != nil || !ok {
		t.Fatalf("Resolve: %v %v", ok, err)
	}
	if info.Spec.Field("path") == nil || !info.Spec.Field("path").Required {
		t.Fatalf("the spec from the Spec call has no required path: %+v", info.Spec.Fields)
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	snk, err := info.NewSink(sinkConfig(t, map[string]any{"path": out, "reject": "bad"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := snk.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{
		{Payload: []byte(`{"a":1}`)}, {Payload: []byte(`bad`)}, {Payload: []byte(`{"a":3}`)}}}
	err = snk.Consume(ctx, b)
	var per connector.MessageErrors
	if !errors.As(err, &per) || len(per) != 1 || !connector.IsPermanent(per[1]) {
		t.Fatalf("Consume: %v, want message 1 failed for good", err)
	}
	if got := lines(t, out); !slices.Equal(got, []string{`{"a":1}`, `{"a":3}`}) {
		t.Fatalf("the file holds %q", got)
	}
}

func TestSinkAdapterUnknownKeyFailsLikeABuiltIn(t *testing.T) {
	bin := build(t, "examples/plugins/go-sink")
	info, _, err := registry().Resolve(connector.KindSink, manifest(t, "go-sink", "sink", bin, nil, ""), "")
	if err != nil {
		t.Fatal(err)
	}
	err = info.Spec.Check(connector.PluginConfig{Values: map[string]any{"pth": "x"}, Source: "sink.toml"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "path"`) {
		t.Fatalf("check of a misspelt key: %v", err)
	}
}

func TestSinkAdapterRestartsAKilledProcessAndDeliversTheBatch(t *testing.T) {
	bin := build(t, "plugin/host/testdata/misbehave")
	m := manifest(t, "crash", "sink", bin, []string{"crash"}, "spec = \"call\"\n[limits]\nrestart_backoff = \"10ms\"\n")
	info, _, err := registry().Resolve(connector.KindSink, m, "")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	snk, err := info.NewSink(sinkConfig(t, map[string]any{"path": out}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := snk.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)
	batch := func(p string) *connector.SinkBatch {
		return &connector.SinkBatch{Messages: []connector.Message{{Payload: []byte(p)}}}
	}
	for _, p := range []string{"1", "2"} {
		if err := snk.Consume(ctx, batch(p)); err != nil {
			t.Fatal(err)
		}
	}
	err = snk.Consume(ctx, batch("3")) // the process exits in it
	if !connector.IsUnavailable(err) || !strings.Contains(err.Error(), "exit status 7") ||
		!strings.Contains(err.Error(), "crashing in the middle of a batch") {
		t.Fatalf("Consume in which the plugin exits: %v", err)
	}
	if err := snk.Consume(ctx, batch("3")); err != nil { // the runtime's retry
		t.Fatalf("Consume again, in a new process: %v", err)
	}
	if got := lines(t, out); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("the file holds %q", got)
	}
}
