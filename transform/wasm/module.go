// Package wasm runs WebAssembly transforms: a module, compiled once, is
// called once per batch with the messages in the layout of package abi
// and returns a verdict per message (keep, drop, replace, split, route,
// fail). It runs on wazero (pure Go) with WASI preview 1, sandboxed: no
// file system, no network, no arguments or environment, and fake clocks
// unless AllowClock grants the real ones. Each call has a deadline
// (Timeout) and each instance a memory ceiling (MemoryLimit); a module
// that traps, runs past its deadline or exhausts its memory is stopped,
// its instance discarded, and the call returns an error saying which.
//
// The host functions a module may import from the module "ferry" (log,
// config, counter_add, state_get, state_put, state_delete) are documented
// in docs/wasm.md with the rest of the guest ABI.
//
// Package wasm knows nothing of Ferry's messages or transforms: package
// transform adapts it to its chain.
package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/transform/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Defaults of Config.
const (
	DefaultFunction    = "transform"
	DefaultTimeout     = 5 * time.Second
	DefaultMemoryLimit = 64 << 20
)

// AllocExport is the function every module exports for the host to get
// room for a batch: ferry_alloc(size i32) -> address i32.
const AllocExport = "ferry_alloc"

// minInitTimeout is the least time an instance's initialization gets
// (its start functions: a Go guest's runtime starts there); Timeout
// bounds it when longer.
const minInitTimeout = 10 * time.Second

// pageSize is WebAssembly's memory page.
const pageSize = 1 << 16

// Errors a call returns, wrapped with the details; each stops the
// instance that met it.
var (
	// ErrTimeout: the call ran past Config.Timeout.
	ErrTimeout = errors.New("wasm module ran past its timeout")
	// ErrMemoryLimit: the module needed more memory than
	// Config.MemoryLimit.
	ErrMemoryLimit = errors.New("wasm module exceeded its memory limit")
	// ErrTrap: the module trapped (a panic, unreachable, an exit).
	ErrTrap = errors.New("wasm module trapped")
	// ErrOutput: the module returned bytes that are not verdicts of the
	// batch (abi.DecodeVerdicts), or an address outside its memory.
	ErrOutput = errors.New("wasm module returned bad output")
)

// Config configures a Module. The zero value of a field takes its
// default.
type Config struct {
	// Function is the export called per batch: (address i32, length i32)
	// -> i64 (abi.Pack of the verdicts' address and length). Default
	// DefaultFunction.
	Function string
	// Config is what the host function config returns (the transform's
	// config table as JSON, in package transform).
	Config []byte
	// Timeout bounds each call, and each instance's initialization with at
	// least 10 s. Default DefaultTimeout; negative means none.
	Timeout time.Duration
	// MemoryLimit is the most memory an instance may have, in bytes,
	// rounded down to 64 KiB pages (at least one). Default
	// DefaultMemoryLimit.
	MemoryLimit int64
	// AllowClock gives the module the real wall clock, monotonic clock and
	// sleep; without it they are wazero's fake clocks (a fixed start that
	// advances 1 ms per reading), so a module cannot observe time.
	AllowClock bool
	// Logger receives the module's log calls; nil discards them.
	Logger *slog.Logger
	// State is the keyed state behind state_get and state_put when a
	// call's context names none (WithState); nil means a new MemState.
	State State
	// MaxIdle is how many idle instances are kept for the next calls;
	// default GOMAXPROCS. Calls beyond it at once get new instances.
	MaxIdle int
	// Exports are further functions (address i32, length i32) -> i64 the
	// module must export, for CallBytes (package udaf's udaf_* functions).
	Exports []string
}

// CacheDirEnv names a directory where compiled code is kept across
// processes; unset, it is kept in memory for the process.
const CacheDirEnv = "FERRY_WASM_CACHE_DIR"

// cache holds compiled code by module content: a transform built again
// (a connector restart, the API's checks) does not compile its module
// again. compiling serializes compiles of the same content, so builds at
// once (the connectors of one file set) compile it once.
var (
	cacheOnce sync.Once
	cache     wazero.CompilationCache
	compiling sync.Map // sha256 of the module → *sync.Mutex
)

func compilationCache() wazero.CompilationCache {
	cacheOnce.Do(func() {
		if dir := os.Getenv(CacheDirEnv); dir != "" {
			if c, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
				cache = c
				return
			}
		}
		cache = wazero.NewCompilationCache()
	})
	return cache
}

// Module is a compiled WebAssembly transform and its pool of instances.
// It is safe for concurrent use; each call runs in an instance of its own.
type Module struct {
	cfg      Config
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	limit    uint64 // memory limit in bytes, whole pages
	state    State

	mu     sync.Mutex
	idle   []*instance
	closed bool

	countersMu sync.Mutex
	counters   map[string]int64
	untaken    map[string]int64 // added since the last TakeCounters
}

// New compiles wasm and makes one instance, so a module that does not
// load (a missing export, an import the host lacks, an initial memory
// beyond the limit) fails here rather than at the first batch.
func New(ctx context.Context, wasm []byte, cfg Config) (*Module, error) {
	if cfg.Function == "" {
		cfg.Function = DefaultFunction
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MemoryLimit <= 0 {
		cfg.MemoryLimit = DefaultMemoryLimit
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = runtime.GOMAXPROCS(0)
	}
	pages := min(max(cfg.MemoryLimit/pageSize, 1), 65536)
	m := &Module{cfg: cfg, limit: uint64(pages) * pageSize, state: cfg.State, counters: map[string]int64{}, untaken: map[string]int64{}}
	if m.state == nil {
		m.state = NewMemState(0)
	}
	m.rt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(pages)).
		WithCompilationCache(compilationCache()))
	if err := m.load(ctx, wasm); err != nil {
		_ = m.rt.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	in, err := m.instantiate(ctx)
	if err != nil {
		_ = m.rt.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	m.put(in)
	return m, nil
}

func (m *Module) load(ctx context.Context, wasm []byte) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	if err := m.hostModule(ctx); err != nil {
		return fmt.Errorf("host functions: %w", err)
	}
	mu, _ := compiling.LoadOrStore(sha256.Sum256(wasm), &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	compiled, err := m.rt.CompileModule(ctx, wasm)
	mu.(*sync.Mutex).Unlock()
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	m.compiled = compiled
	fns := compiled.ExportedFunctions()
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	type export struct {
		name            string
		params, results []api.ValueType
		sig             string
	}
	call := func(name string) export {
		return export{name, []api.ValueType{i32, i32}, []api.ValueType{i64}, "(address i32, length i32) -> i64"}
	}
	wants := []export{{AllocExport, []api.ValueType{i32}, []api.ValueType{i32}, "(size i32) -> i32"}, call(m.cfg.Function)}
	for _, name := range m.cfg.Exports {
		wants = append(wants, call(name))
	}
	for _, want := range wants {
		fn, ok := fns[want.name]
		if !ok {
			return fmt.Errorf("the module does not export the function %q (it exports %s)", want.name, exportNames(fns))
		}
		if !equalTypes(fn.ParamTypes(), want.params) || !equalTypes(fn.ResultTypes(), want.results) {
			return fmt.Errorf("the module's function %q is not %s", want.name, want.sig)
		}
	}
	if _, ok := compiled.ExportedMemories()["memory"]; !ok {
		return errors.New(`the module does not export its memory as "memory"`)
	}
	mc := wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize")
	if m.cfg.AllowClock {
		mc = mc.WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	}
	m.modCfg = mc
	return nil
}

func exportNames(fns map[string]api.FunctionDefinition) string {
	var out []string
	for n := range fns {
		if !strings.HasPrefix(n, "_") {
			out = append(out, fmt.Sprintf("%q", n))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func equalTypes(a, b []api.ValueType) bool { return bytes.Equal(a, b) }

// Close stops every instance and frees the compiled code. Calls after
// Close fail. It is idempotent.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.idle = nil
	m.mu.Unlock()
	return m.rt.Close(ctx)
}

// overlayKeyType keys a call's *overlay in the context host functions get.
type overlayKeyType struct{}

// Call runs the module's function on a batch and returns a verdict per
// message. An error means the call as a whole failed (ErrTimeout,
// ErrMemoryLimit, ErrTrap or ErrOutput wrapped with the reason, or ctx's
// error when ctx ended first); the instance is then discarded.
func (m *Module) Call(ctx context.Context, msgs []abi.Message) ([]abi.Verdict, error) {
	in, err := m.get(ctx)
	if err != nil {
		return nil, err
	}
	// The call's state changes are kept aside and made only when it
	// succeeds, in the state of ctx (WithState) or the module's own.
	base, ok := ctx.Value(stateKeyType{}).(State)
	if !ok {
		base = m.state
	}
	changes := &overlay{base: base}
	callCtx, cancel := context.WithValue(ctx, overlayKeyType{}, changes), context.CancelFunc(func() {})
	if m.cfg.Timeout > 0 {
		callCtx, cancel = context.WithTimeout(callCtx, m.cfg.Timeout)
	}
	vs, err := in.call(callCtx, msgs)
	cancel()
	if err != nil {
		err = m.fault(ctx, in, err)
		in.close()
		return nil, err
	}
	m.put(in)
	if err := changes.apply(); err != nil {
		return nil, fmt.Errorf("wasm module's keyed state: %w", err)
	}
	return vs, nil
}

// TakeCounters returns what counter_add added to each counter since the
// last TakeCounters (nil when nothing): the runtime adds it to its metrics.
func (m *Module) TakeCounters() map[string]int64 {
	m.countersMu.Lock()
	defer m.countersMu.Unlock()
	if len(m.untaken) == 0 {
		return nil
	}
	out := m.untaken
	m.untaken = map[string]int64{}
	return out
}

// Counters returns the module's counters (counter_add) so far.
func (m *Module) Counters() map[string]int64 {
	m.countersMu.Lock()
	defer m.countersMu.Unlock()
	out := make(map[string]int64, len(m.counters))
	for k, v := range m.counters {
		out[k] = v
	}
	return out
}

// State is the module's keyed state.
func (m *Module) State() State { return m.state }

func (m *Module) get(ctx context.Context) (*instance, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("wasm module is closed")
	}
	if n := len(m.idle); n > 0 {
		in := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return in, nil
	}
	m.mu.Unlock()
	return m.instantiate(ctx)
}

func (m *Module) put(in *instance) {
	m.mu.Lock()
	if !m.closed && len(m.idle) < m.cfg.MaxIdle {
		m.idle = append(m.idle, in)
		in = nil
	}
	m.mu.Unlock()
	if in != nil {
		in.close()
	}
}

// fault turns a failed call into the error to report.
func (m *Module) fault(ctx context.Context, in *instance, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("wasm call stopped: %w", context.Cause(ctx))
	}
	if errors.Is(err, ErrOutput) {
		return err
	}
	tail := in.stderr.String()
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
		return fmt.Errorf("%w (%s); stopped", ErrTimeout, m.cfg.Timeout)
	}
	if m.outOfMemory(in, tail) {
		return fmt.Errorf("%w (%s); stopped%s", ErrMemoryLimit, sizeText(m.limit), detail(tail))
	}
	return fmt.Errorf("%w: %s%s", ErrTrap, firstLine(err.Error()), detail(tail))
}

// outOfMemory guesses whether a trap came from the memory limit: the
// module's own last words say so (Go's runtime, Rust's allocator), or its
// memory is within a page of the limit.
func (m *Module) outOfMemory(in *instance, tail string) bool {
	if strings.Contains(tail, "out of memory") || strings.Contains(tail, "memory allocation of") {
		return true
	}
	return in.mem != nil && uint64(in.mem.Size())+pageSize >= m.limit
}

func detail(tail string) string {
	if tail == "" {
		return ""
	}
	return ": " + tail
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func sizeText(n uint64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// instance is one instantiation of the module, used by one call at a time.
type instance struct {
	mod    api.Module
	alloc  api.Function
	fn     api.Function
	mem    api.Memory
	stderr *tail
	batch  []byte
	stack  [2]uint64
	fns    map[string]api.Function // CallBytes's functions, looked up once
}

func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	t := &tail{}
	initCtx, cancel := ctx, context.CancelFunc(func() {})
	if m.cfg.Timeout > 0 {
		initCtx, cancel = context.WithTimeout(ctx, max(m.cfg.Timeout, minInitTimeout))
	}
	defer cancel()
	mod, err := m.rt.InstantiateModule(initCtx, m.compiled, m.modCfg.WithStderr(t).WithStdout(t))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wasm instantiate stopped: %w", context.Cause(ctx))
		}
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
			return nil, fmt.Errorf("%w initializing (%s)", ErrTimeout, max(m.cfg.Timeout, minInitTimeout))
		}
		return nil, fmt.Errorf("instantiate (memory_limit %s): %s%s", sizeText(m.limit), firstLine(err.Error()), detail(t.String()))
	}
	return &instance{mod: mod, alloc: mod.ExportedFunction(AllocExport), fn: mod.ExportedFunction(m.cfg.Function),
		mem: mod.ExportedMemory("memory"), stderr: t}, nil
}

func (in *instance) close() { _ = in.mod.Close(context.Background()) }

// maxKeptBatch is the largest batch buffer an instance keeps between calls.
const maxKeptBatch = 4 << 20

func (in *instance) call(ctx context.Context, msgs []abi.Message) ([]abi.Verdict, error) {
	in.stderr.Reset()
	in.batch = abi.AppendBatch(in.batch[:0], msgs)
	defer func() {
		if cap(in.batch) > maxKeptBatch {
			in.batch = nil
		}
	}()
	in.stack[0] = uint64(len(in.batch))
	if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(in.stack[0])
	if !in.mem.Write(ptr, in.batch) {
		return nil, fmt.Errorf("%w: %s returned address %d, and %d bytes there are outside its memory (%d bytes)",
			ErrOutput, AllocExport, ptr, len(in.batch), in.mem.Size())
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(in.batch))
	if err := in.fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	optr, n := abi.Unpack(in.stack[0])
	view, ok := in.mem.Read(optr, n)
	if !ok {
		return nil, fmt.Errorf("%w: verdicts at address %d, %d bytes, are outside its memory (%d bytes)",
			ErrOutput, optr, n, in.mem.Size())
	}
	vs, err := abi.DecodeVerdicts(bytes.Clone(view), len(msgs))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutput, err)
	}
	return vs, nil
}

// tail keeps the first bytes a module wrote to its standard output and
// error during a call, for the error of a trap (a Go guest's panic
// message comes first, then its goroutine dump, which is left out).
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 256

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := tailSize - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tail) Reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}

// String is what was written, on one line, up to a goroutine dump.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if i := strings.Index(s, "\ngoroutine "); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}
