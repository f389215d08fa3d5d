// Package filebench measures a whole Ferry pipeline: an NDJSON file read
// by the `file` source, an add_fields transform, the embedded broker, and
// the `file` sink writing NDJSON, all in one process through the real
// runtime. It owns the run behind `ferry bench pipeline` and the
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
	"strconv"
	"time"

	"github.com/ferryhq/ferry/config"
	_ "github.com/ferryhq/ferry/connectors/file" // the file source and sink
	"github.com/ferryhq/ferry/runtime"
)

// Options of a run. The zero value runs 1,000,000 records of 200 bytes.
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
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Stall bounds how long the output may stop growing before the run
	// fails; default 2 minutes.
	Stall time.Duration
}

// Result is what a run measured. Elapsed and CPU cover the runtime's start
// until the last record is in the output file (fsynced), not the input's
// generation or the output's check.
type Result struct {
	Records     int
	InputBytes  int64
	OutputBytes int64
	Elapsed     time.Duration
	// CPU is the user and system time of the whole process (runtime,
	// broker and connectors) over Elapsed, from getrusage.
	CPU time.Duration
}

// MessagesPerSecond is records over elapsed time.
func (r Result) MessagesPerSecond() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// MBPerSecond is input megabytes (10^6 bytes) over elapsed time.
func (r Result) MBPerSecond() float64 { return float64(r.InputBytes) / 1e6 / r.Elapsed.Seconds() }

// CPUMicrosPerMessage is CPU microseconds per record.
func (r Result) CPUMicrosPerMessage() float64 {
	return float64(r.CPU.Microseconds()) / float64(r.Records)
}

// added is what the add_fields transform appends to each record.
const added = `,"pipeline":"ferry"`

// Run generates the input, runs the pipeline until every record is in the
// output, checks the output, and stops the runtime.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Records == 0 {
		o.Records = 1_000_000
	}
	if o.Size == 0 {
		o.Size = 200
	}
	if o.BatchLength == 0 {
		o.BatchLength = 1000
	}
	if o.Stall == 0 {
		o.Stall = 2 * time.Minute
	}
	switch {
	case o.Records < 1:
		return Result{}, fmt.Errorf("records is %d, want at least 1", o.Records)
	case o.Size < 64 || o.Size > 1<<20:
		return Result{}, fmt.Errorf("size is %d, want 64 to 1048576 bytes", o.Size)
	case o.BatchLength < 1:
		return Result{}, fmt.Errorf("batch length is %d, want at least 1", o.BatchLength)
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
	output := filepath.Join(dir, "out", "records-0.ndjson")
	res := Result{Records: o.Records}
	var err error
	if res.InputBytes, err = writeInput(input, o.Records, o.Size); err != nil {
		return Result{}, err
	}
	want := res.InputBytes + int64(o.Records*len(added))
	if err := writeConfig(dir, input, o.BatchLength); err != nil {
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

	cpu0, start := cpuTime(), time.Now()
	if err := rt.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start the runtime: %w", err)
	}
	waitErr := waitForSize(ctx, output, want, o.Stall)
	res.Elapsed, res.CPU = time.Since(start), cpuTime()-cpu0
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := rt.Stop(stopCtx)
	if waitErr != nil {
		return res, errors.Join(waitErr, stopErr)
	}
	if stopErr != nil {
		return res, fmt.Errorf("stop the runtime: %w", stopErr)
	}
	res.OutputBytes, err = checkOutput(output, o.Records)
	return res, err
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

func writeConfig(dir, input string, batch int) error {
	files := map[string]string{
		"config.toml": `[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
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
[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "pipeline"
value.static = "ferry"
[plugin_config]
paths = [%[1]q]
format = "ndjson"
batch_size = %[2]d
max_batch_bytes = "64MiB"
`, input, batch),
		"connectors/sink.toml": fmt.Sprintf(`type = "sink"
key = "bench_sink"
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
`, filepath.Join(dir, "out", "{topic}-{partition}.ndjson"), batch),
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

// waitForSize waits until the output holds want bytes (the sink fsyncs
// before the runtime commits, so the size is what is durable), failing
// when it stops growing for stall.
func waitForSize(ctx context.Context, path string, want int64, stall time.Duration) error {
	var last int64 = -1
	lastChange := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		var size int64
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		if size >= want {
			return nil
		}
		if size != last {
			last, lastChange = size, time.Now()
		} else if time.Since(lastChange) > stall {
			return fmt.Errorf("output stopped at %d of %d bytes for %s", size, want, stall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// checkOutput checks that the output holds every record once, transformed.
func checkOutput(path string, n int) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open output: %w", err)
	}
	defer f.Close()
	seen := make([]bool, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<21)
	var bytesRead int64
	count := 0
	for sc.Scan() {
		line := sc.Bytes()
		bytesRead += int64(len(line) + 1)
		if !bytes.HasSuffix(line, []byte(added+"}")) {
			return bytesRead, fmt.Errorf("output line %d lacks the added field: %.80s", count+1, line)
		}
		rest, ok := bytes.CutPrefix(line, []byte(`{"id":`))
		end := bytes.IndexByte(rest, ',')
		if !ok || end < 0 {
			return bytesRead, fmt.Errorf("output line %d is not a record: %.80s", count+1, line)
		}
		id, err := strconv.Atoi(string(rest[:end]))
		if err != nil || id < 0 || id >= n || seen[id] {
			return bytesRead, fmt.Errorf("output line %d: id %q is out of range or repeated", count+1, rest[:end])
		}
		seen[id] = true
		count++
	}
	if err := sc.Err(); err != nil {
		return bytesRead, fmt.Errorf("read output: %w", err)
	}
	if count != n {
		return bytesRead, fmt.Errorf("output has %d records, want %d", count, n)
	}
	return bytesRead, nil
}
