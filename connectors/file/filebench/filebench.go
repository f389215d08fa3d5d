// Package filebench measures a whole Ferry pipeline: an NDJSON file read
// by the `file` source, a chain of JSON transforms, the embedded broker,
// and one or more `file` sinks writing NDJSON, all in one process through
// the real runtime. It owns the run behind `ferry bench pipeline` and the
// BenchmarkFilePipeline benchmark.
package filebench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/config"
	_ "github.com/ferryhq/ferry/connectors/file" // the file source and sink
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/cputime"
	"github.com/ferryhq/ferry/internal/gcfloor"
	"github.com/ferryhq/ferry/runtime"
)

// Options of a run. The zero value runs 1,000,000 records of 200 bytes
// through the three-field chain into one sink on one partition.
type Options struct {
	// Records is how many NDJSON records go through; default 1,000,000.
	Records int
	// Size is each input record's length in bytes, without its "\n"; at
	// least 64, default 200.
	Size int
	// Dir is where the input, the output and the runtime's state go; empty
	// means a temporary directory, removed afterwards.
	Dir string
	// BatchLength is the source's batch_size and both streams'
	// batch_length; default 1000.
	BatchLength int
	// Transforms is the source's chain: Fields (the default), Add or None.
	Transforms Chain
	// Sinks is how many file sinks read the topic, each in its own consumer
	// group writing its own files; default 1.
	Sinks int
	// Partitions is the topic's partition count; default 1.
	Partitions int
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Stall bounds how long the output may stop growing before the run
	// fails; default 2 minutes.
	Stall time.Duration
}

// Chain names the transforms a run applies on the source.
type Chain string

const (
	// Fields is three field changes, as the usual comparison of stream
	// processors runs them: add two fields, delete one, update one when
	// present (add_fields, delete_fields, update_fields).
	Fields Chain = "fields"
	// Add is one add_fields transform adding one field.
	Add Chain = "add"
	// None sends the records as they are.
	None Chain = "none"
)

// Chains are the values Options.Transforms takes.
var Chains = []Chain{Fields, Add, None}

// Result is what a run measured. Elapsed and CPU cover the runtime's start
// until the last record is in every sink's output (fsynced), not the
// input's generation or the output's check.
type Result struct {
	Records     int
	InputBytes  int64
	OutputBytes int64 // of all sinks together
	Elapsed     time.Duration
	// CPU is the user and system time of the whole process (runtime,
	// broker and connectors) over Elapsed, from getrusage.
	CPU time.Duration
	// PeakRSS is the process's peak resident set over the run, in bytes
	// (Linux: VmHWM, reset at the start; 0 where not measured). It counts
	// the pages of the binary the process has touched (tens of MB).
	PeakRSS int64
	// PeakAnon is the most anonymous resident memory (the heap, stacks)
	// seen by sampling every 10 ms (Linux: RssAnon).
	PeakAnon int64
}

// MessagesPerSecond is records over elapsed time.
func (r Result) MessagesPerSecond() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// MBPerSecond is input megabytes (10^6 bytes) over elapsed time.
func (r Result) MBPerSecond() float64 { return float64(r.InputBytes) / 1e6 / r.Elapsed.Seconds() }

// CPUMicrosPerMessage is CPU microseconds per record.
func (r Result) CPUMicrosPerMessage() float64 {
	return float64(r.CPU.Microseconds()) / float64(r.Records)
}

// Check fills in o's defaults and reports an option out of range.
func (o *Options) Check() error { return o.defaults() }

func (o *Options) defaults() error {
	if o.Records == 0 {
		o.Records = 1_000_000
	}
	if o.Size == 0 {
		o.Size = 200
	}
	if o.BatchLength == 0 {
		o.BatchLength = 1000
	}
	if o.Transforms == "" {
		o.Transforms = Fields
	}
	if o.Sinks == 0 {
		o.Sinks = 1
	}
	if o.Partitions == 0 {
		o.Partitions = 1
	}
	if o.Stall == 0 {
		o.Stall = 2 * time.Minute
	}
	switch {
	case o.Records < 1:
		return fmt.Errorf("records is %d, want at least 1", o.Records)
	case o.Size < 64 || o.Size > 1<<20:
		return fmt.Errorf("size is %d, want 64 to 1048576 bytes", o.Size)
	case o.BatchLength < 1:
		return fmt.Errorf("batch length is %d, want at least 1", o.BatchLength)
	case !slices.Contains(Chains, o.Transforms):
		return fmt.Errorf("transforms is %q, want one of %v", o.Transforms, Chains)
	case o.Sinks < 1 || o.Sinks > 64:
		return fmt.Errorf("sinks is %d, want 1 to 64", o.Sinks)
	case o.Partitions < 1 || o.Partitions > 1024:
		return fmt.Errorf("partitions is %d, want 1 to 1024", o.Partitions)
	}
	return nil
}

// Run generates the input, runs the pipeline until every record is in
// every sink's output, checks the output, and stops the runtime.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "ferry-bench-")
		if err != nil {
			return Result{}, fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	input := filepath.Join(dir, "input.ndjson")
	res := Result{Records: o.Records}
	var err error
	if res.InputBytes, err = writeInput(input, o.Records, o.Size); err != nil {
		return Result{}, err
	}
	want := int64(0)
	for i := range o.Records {
		want += int64(len(output(nil, i, o.Size, o.Transforms)) + 1)
	}
	if err := writeConfig(dir, input, o); err != nil {
		return Result{}, err
	}
	if err := createTopic(ctx, filepath.Join(dir, "state", "broker"), o.Partitions); err != nil {
		return Result{}, err
	}
	env := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
	if err != nil {
		return Result{}, err
	}
	rt, err := runtime.New(cfg, runtime.Options{Logger: o.Logger, ConfigOptions: []config.Option{env}})
	if err != nil {
		return Result{}, err
	}

	gcCtx, stopGC := context.WithCancel(ctx)
	defer stopGC()
	gcfloor.Start(gcCtx, gcfloor.DefaultFloor, time.Second) // as ferry run does
	goruntime.GC()                                          // the input generation's garbage goes before the run
	resetPeakRSS()
	cpu0, start := cputime.Process(), time.Now()
	if err := rt.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start the runtime: %w", err)
	}
	sampled := sampleAnon(gcCtx)
	waitErr := waitForSize(ctx, sinkDirs(dir, o.Sinks), want, o.Stall)
	res.Elapsed, res.CPU, res.PeakRSS = time.Since(start), cputime.Process()-cpu0, peakRSS()
	stopGC()
	res.PeakAnon = <-sampled
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := rt.Stop(stopCtx)
	if waitErr != nil {
		return res, errors.Join(waitErr, stopErr)
	}
	if stopErr != nil {
		return res, fmt.Errorf("stop the runtime: %w", stopErr)
	}
	for _, d := range sinkDirs(dir, o.Sinks) {
		n, err := checkOutput(d, o)
		res.OutputBytes += n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// sampleAnon samples the anonymous resident memory every 10 ms until ctx
// ends, then sends the most it saw.
func sampleAnon(ctx context.Context) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		peak := anonRSS()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- peak
				return
			case <-t.C:
				peak = max(peak, anonRSS())
			}
		}
	}()
	return out
}

// createTopic creates the topic with its partitions in the embedded
// broker's data directory before the runtime opens it (the runtime creates
// missing topics with one partition). The broker's own system topics are
// made here too, so the timed run starts from a data directory that is
// not new, as every start after a deployment's first does.
func createTopic(ctx context.Context, dataDir string, partitions int) error {
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", DataDir: dataDir, RootUsername: "iggy", RootPassword: "iggy",
		Events: broker.Events{Enabled: true}})
	if err != nil {
		return fmt.Errorf("prepare the broker: %w", err)
	}
	defer b.Close()
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	if err != nil {
		return fmt.Errorf("prepare the broker: %w", err)
	}
	defer c.Close()
	if _, err := c.CreateStream(ctx, "bench"); err != nil {
		return fmt.Errorf("create stream bench: %w", err)
	}
	if _, err := c.CreateTopic(ctx, iggy.NamedID("bench"), "records", uint32(partitions)); err != nil {
		return fmt.Errorf("create topic bench/records: %w", err)
	}
	return nil
}

func sinkDirs(dir string, sinks int) []string {
	out := make([]string, sinks)
	for i := range out {
		out[i] = filepath.Join(dir, "out", fmt.Sprintf("sink-%d", i))
	}
	return out
}

// record returns record i, exactly size bytes of JSON.
func record(buf []byte, i, size int) []byte {
	buf = append(buf[:0], `{"id":`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, `,"title":"Hello","name":"World","text":"`...)
	for len(buf) < size-2 {
		buf = append(buf, 'x')
	}
	return append(buf, '"', '}')
}

// output returns what chain makes of record i: with Fields, "title"
// deleted, "name" updated, two fields added.
func output(buf []byte, i, size int, chain Chain) []byte {
	rec := record(buf, i, size)
	switch chain {
	case Add:
		return append(rec[:len(rec)-1], `,"pipeline":"ferry"}`...)
	case Fields:
		out := make([]byte, 0, len(rec)+32)
		out = append(out, rec[:bytes.IndexByte(rec, ',')]...) // {"id":N
		out = append(out, `,"name":"Ferry"`...)
		text := rec[bytes.Index(rec, []byte(`,"text":`)) : len(rec)-1]
		out = append(out, text...)
		return append(out, `,"pipeline":"ferry","version":2}`...)
	}
	return rec
}

func writeInput(path string, n, size int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("create input: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := range n {
		buf = record(buf, i, size)
		w.Write(buf)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("write input: %w", err)
	}
	return int64(n) * int64(size+1), f.Close()
}

// transforms is each chain's TOML on the source's stream.
var transforms = map[Chain]string{
	None: "",
	Add: `[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "pipeline"
value.static = "ferry"
`,
	Fields: `[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "pipeline"
value.static = "ferry"
[[transforms.add_fields.fields]]
key = "version"
value.static = 2
[transforms.delete_fields]
enabled = true
fields = ["title"]
[transforms.update_fields]
enabled = true
[[transforms.update_fields.fields]]
key = "name"
value.static = "Ferry"
condition = "key_exists"
`,
}

func writeConfig(dir, input string, o Options) error {
	files := map[string]string{
		"config.toml": `[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
username = "iggy"
password = "iggy"
[state]
path = "state"
[connectors]
config_dir = "connectors"
[http]
enabled = false
`,
		"connectors/source.toml": fmt.Sprintf(`type = "source"
key = "bench_source"
path = "file"
[[streams]]
stream = "bench"
topic = "records"
schema = "json"
batch_length = %[2]d
%[3]s[plugin_config]
paths = [%[1]q]
format = "ndjson"
batch_size = %[2]d
`, input, o.BatchLength, transforms[o.Transforms]),
	}
	for i, d := range sinkDirs(dir, o.Sinks) {
		files[fmt.Sprintf("connectors/sink-%d.toml", i)] = fmt.Sprintf(`type = "sink"
key = "bench_sink_%[3]d"
path = "file"
[[streams]]
stream = "bench"
topics = ["records"]
schema = "json"
batch_length = %[2]d
poll_interval = "1ms"
[plugin_config]
path = %[1]q
format = "ndjson"
`, filepath.Join(d, "{topic}-{partition}.ndjson"), o.BatchLength, i)
	}
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		return fmt.Errorf("config directory: %w", err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// dirSize is the size of the files in dir (0 when it does not exist yet).
func dirSize(dir string) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// waitForSize waits until each sink's directory holds want bytes (the
// sink fsyncs before the runtime commits, so the size is what is durable),
// failing when the output stops growing for stall.
func waitForSize(ctx context.Context, dirs []string, want int64, stall time.Duration) error {
	var last int64 = -1
	lastChange := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		var total int64
		done := true
		for _, d := range dirs {
			n := dirSize(d)
			total += n
			done = done && n >= want
		}
		if done {
			return nil
		}
		if total != last {
			last, lastChange = total, time.Now()
		} else if time.Since(lastChange) > stall {
			return fmt.Errorf("output stopped at %d of %d bytes for %s", total, want*int64(len(dirs)), stall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// checkOutput checks that one sink's files hold every record once,
// transformed, and returns their size.
func checkOutput(dir string, o Options) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read output: %w", err)
	}
	seen := make([]bool, o.Records)
	var bytesRead int64
	count := 0
	var want []byte
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return bytesRead, fmt.Errorf("open output: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<21+64)
		line := 0
		for sc.Scan() {
			got := sc.Bytes()
			line++
			bytesRead += int64(len(got) + 1)
			rest, ok := bytes.CutPrefix(got, []byte(`{"id":`))
			end := bytes.IndexByte(rest, ',')
			if !ok || end < 0 {
				f.Close()
				return bytesRead, fmt.Errorf("%s:%d is not a record: %.80s", path, line, got)
			}
			id, err := strconv.Atoi(string(rest[:end]))
			if err != nil || id < 0 || id >= o.Records || seen[id] {
				f.Close()
				return bytesRead, fmt.Errorf("%s:%d: id %q is out of range or repeated", path, line, rest[:end])
			}
			if want = output(want, id, o.Size, o.Transforms); !bytes.Equal(got, want) {
				f.Close()
				return bytesRead, fmt.Errorf("%s:%d is not the transformed record %d:\n got %.120s\nwant %.120s", path, line, id, got, want)
			}
			seen[id] = true
			count++
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return bytesRead, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if count != o.Records {
		return bytesRead, fmt.Errorf("%s has %d records, want %d", dir, count, o.Records)
	}
	return bytesRead, nil
}
