package udaf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/transform/wasm"
	"github.com/ferryhq/ferry/udaf/abi"
)

// Defaults of Limits.
const (
	DefaultMemory      = 64 << 20
	DefaultCallTimeout = 5 * time.Second
)

// Errors of a call, wrapped with the module, the call and the details.
var (
	ErrTimeout     = wasm.ErrTimeout
	ErrMemoryLimit = wasm.ErrMemoryLimit
	ErrTrap        = wasm.ErrTrap
	ErrOutput      = wasm.ErrOutput
	// ErrAggregate: the aggregate refused the call; the error is also an
	// *abi.GuestError with its message.
	ErrAggregate = errors.New("the aggregate returned an error")
)

// Limits bound a module's instances. A zero field takes its default.
type Limits struct {
	// Memory is the most memory an instance may have, in bytes, rounded
	// down to 64 KiB pages (at least one). Default DefaultMemory.
	Memory uint32
	// CallTimeout bounds each call. Default DefaultCallTimeout; negative
	// means none.
	CallTimeout time.Duration
}

// Module is a loaded aggregate. It is safe for concurrent use: each call
// runs in an instance of a pool, one call per instance at a time. The
// bytes its methods return are the caller's (copied out of the module's
// memory), and those it is given are not kept.
type Module struct {
	name string
	w    *wasm.Module
}

// Load reads and compiles the module at wasmPath and makes one instance,
// so a module that does not load (not WebAssembly, an export missing or
// of the wrong type, an initial memory beyond limits.Memory) fails here.
func Load(ctx context.Context, wasmPath string, limits Limits) (*Module, error) {
	name := filepath.Base(wasmPath)
	data, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, fmt.Errorf("udaf module: %w", err)
	}
	if limits.Memory == 0 {
		limits.Memory = DefaultMemory
	}
	if limits.CallTimeout == 0 {
		limits.CallTimeout = DefaultCallTimeout
	}
	w, err := wasm.New(ctx, data, wasm.Config{
		Function:    abi.AddExport,
		Exports:     []string{abi.InitExport, abi.AddAllExport, abi.MergeExport, abi.EmitExport},
		Timeout:     limits.CallTimeout,
		MemoryLimit: int64(limits.Memory),
	})
	if err != nil {
		return nil, fmt.Errorf("udaf module %s (%s): %w", name, wasmPath, err)
	}
	return &Module{name: name, w: w}, nil
}

// Init returns a group's empty state.
func (m *Module) Init(ctx context.Context) ([]byte, error) {
	return m.call(ctx, abi.InitExport, nil)
}

// Add returns state with input, a message's JSON payload, added.
func (m *Module) Add(ctx context.Context, state, input []byte) ([]byte, error) {
	return m.call(ctx, abi.AddExport, abi.AppendPair(make([]byte, 0, 4+len(state)+len(input)), state, input))
}

// AddAll returns state with inputs added in order, as Add of each would,
// in one call of the module (a call costs about as much as a cheap
// aggregate's Add). An input the aggregate refuses fails the whole call,
// its error naming the input's index; state is then as it was.
func (m *Module) AddAll(ctx context.Context, state []byte, inputs [][]byte) ([]byte, error) {
	return m.call(ctx, abi.AddAllExport, abi.AppendList(make([]byte, 0, abi.ListSize(state, inputs)), state, inputs))
}

// Merge returns the state of two states of one group together.
func (m *Module) Merge(ctx context.Context, a, b []byte) ([]byte, error) {
	return m.call(ctx, abi.MergeExport, abi.AppendPair(make([]byte, 0, 4+len(a)+len(b)), a, b))
}

// Emit returns the output value of state, JSON.
func (m *Module) Emit(ctx context.Context, state []byte) ([]byte, error) {
	out, err := m.call(ctx, abi.EmitExport, state)
	if err != nil {
		return nil, err
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("udaf module %s: %s: %w: it returned %d bytes that are not JSON", m.name, abi.EmitExport, ErrOutput, len(out))
	}
	return out, nil
}

// Close stops every instance and frees the compiled code; calls after it
// fail. It is idempotent.
func (m *Module) Close(ctx context.Context) error {
	if err := m.w.Close(ctx); err != nil {
		return fmt.Errorf("udaf module %s: close: %w", m.name, err)
	}
	return nil
}

func (m *Module) call(ctx context.Context, fn string, input []byte) ([]byte, error) {
	out, err := m.w.CallBytes(ctx, fn, input)
	if err != nil {
		return nil, fmt.Errorf("udaf module %s: %s: %w", m.name, fn, err)
	}
	body, err := abi.DecodeResult(out)
	if err != nil {
		var g *abi.GuestError
		if errors.As(err, &g) {
			return nil, fmt.Errorf("udaf module %s: %s: %w: %w", m.name, fn, ErrAggregate, g)
		}
		return nil, fmt.Errorf("udaf module %s: %s: %w: %w", m.name, fn, ErrOutput, err)
	}
	return body, nil
}
