package wasm

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero/api"
)

// HostModule is the import module of the host functions.
const HostModule = "ferry"

// Limits of the host functions' arguments.
const (
	maxLog         = 4 << 10 // a log line is cut there
	maxCounterName = 128
	maxCounters    = 1024
)

// Log levels of the host function log.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// hostModule instantiates the "ferry" import module. A host function that
// is given memory outside the module's, or arguments beyond the limits,
// panics, which wazero turns into a trap of the call.
func (m *Module) hostModule(ctx context.Context) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	b := m.rt.NewHostModuleBuilder(HostModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	// log(level i32, address i32, length i32)
	fn("log", m.hostLog, []api.ValueType{i32, i32, i32}, nil)
	// config(address i32, capacity i32) -> length i32
	fn("config", m.hostConfig, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// counter_add(name address i32, name length i32, delta i64)
	fn("counter_add", m.hostCounterAdd, []api.ValueType{i32, i32, i64}, nil)
	// state_get(key address, key length, value address, capacity) -> length i32 (-1: none)
	fn("state_get", m.hostStateGet, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	// state_put(key address, key length, value address, value length)
	fn("state_put", m.hostStatePut, []api.ValueType{i32, i32, i32, i32}, nil)
	// state_delete(key address, key length)
	fn("state_delete", m.hostStateDelete, []api.ValueType{i32, i32}, nil)
	_, err := b.Instantiate(ctx)
	return err
}

// read is n bytes of mod's memory at ptr; it panics (traps) when they are
// outside it.
func read(mod api.Module, fn string, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(fmt.Errorf("%s.%s: %d bytes at address %d are outside the module's memory", HostModule, fn, n, ptr))
	}
	return b
}

// write copies v to mod's memory at ptr, up to capacity bytes, and returns
// len(v), as config and state_get do.
func write(mod api.Module, fn string, ptr, capacity uint32, v []byte) uint32 {
	k := min(uint32(len(v)), capacity)
	if k > 0 && !mod.Memory().Write(ptr, v[:k]) {
		panic(fmt.Errorf("%s.%s: %d bytes at address %d are outside the module's memory", HostModule, fn, k, ptr))
	}
	return uint32(len(v))
}

func (m *Module) hostLog(ctx context.Context, mod api.Module, s []uint64) {
	level, ptr, n := int32(s[0]), uint32(s[1]), uint32(s[2])
	msg := read(mod, "log", ptr, min(n, maxLog))
	if m.cfg.Logger == nil {
		return
	}
	l := slog.LevelInfo
	switch {
	case level <= LevelDebug:
		l = slog.LevelDebug
	case level == LevelWarn:
		l = slog.LevelWarn
	case level >= LevelError:
		l = slog.LevelError
	}
	m.cfg.Logger.Log(ctx, l, string(msg), "from", "wasm")
}

func (m *Module) hostConfig(_ context.Context, mod api.Module, s []uint64) {
	s[0] = uint64(write(mod, "config", uint32(s[0]), uint32(s[1]), m.cfg.Config))
}

func (m *Module) hostCounterAdd(_ context.Context, mod api.Module, s []uint64) {
	ptr, n, delta := uint32(s[0]), uint32(s[1]), int64(s[2])
	if n == 0 || n > maxCounterName {
		panic(fmt.Errorf("%s.counter_add: a name of %d bytes (1 to %d)", HostModule, n, maxCounterName))
	}
	name := read(mod, "counter_add", ptr, n)
	m.countersMu.Lock()
	defer m.countersMu.Unlock()
	if _, ok := m.counters[string(name)]; !ok && len(m.counters) >= maxCounters {
		panic(fmt.Errorf("%s.counter_add: more than %d counters", HostModule, maxCounters))
	}
	m.counters[string(name)] += delta
	m.untaken[string(name)] += delta
}

func stateKey(mod api.Module, fn string, ptr, n uint32) []byte {
	if n > MaxStateKey {
		panic(fmt.Errorf("%s.%s: a key of %d bytes, at most %d", HostModule, fn, n, MaxStateKey))
	}
	return read(mod, fn, ptr, n)
}

// callState is the state a host function changes: the call's overlay.
func (m *Module) callState(ctx context.Context) State {
	if o, ok := ctx.Value(overlayKeyType{}).(*overlay); ok {
		return o
	}
	return m.state
}

func (m *Module) hostStateGet(ctx context.Context, mod api.Module, s []uint64) {
	key := stateKey(mod, "state_get", uint32(s[0]), uint32(s[1]))
	v, ok := m.callState(ctx).Get(key)
	if !ok {
		s[0] = uint64(uint32(0xFFFFFFFF)) // -1
		return
	}
	s[0] = uint64(write(mod, "state_get", uint32(s[2]), uint32(s[3]), v))
}

func (m *Module) hostStatePut(ctx context.Context, mod api.Module, s []uint64) {
	key := stateKey(mod, "state_put", uint32(s[0]), uint32(s[1]))
	n := uint32(s[3])
	if n > MaxStateValue {
		panic(fmt.Errorf("%s.state_put: a value of %d bytes, at most %d", HostModule, n, MaxStateValue))
	}
	if err := m.callState(ctx).Put(key, read(mod, "state_put", uint32(s[2]), n)); err != nil {
		panic(fmt.Errorf("%s.state_put: %w", HostModule, err))
	}
}

func (m *Module) hostStateDelete(ctx context.Context, mod api.Module, s []uint64) {
	m.callState(ctx).Delete(stateKey(mod, "state_delete", uint32(s[0]), uint32(s[1])))
}
