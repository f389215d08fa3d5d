package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ferryhq/ferry/transform/wasm/abi"
	"github.com/tetratelabs/wazero/api"
)

// CallBytes calls the export function, one of Config.Function and
// Config.Exports, with input written to the module's memory (through
// ferry_alloc) and returns a copy of the bytes at the address and length
// it returns (abi.Pack), for ABIs other than the transform's batches
// (package udaf). Errors, limits, the pool and the keyed state's overlay
// are as for Call.
func (m *Module) CallBytes(ctx context.Context, function string, input []byte) ([]byte, error) {
	if function != m.cfg.Function && !slices.Contains(m.cfg.Exports, function) {
		return nil, fmt.Errorf("wasm: %q is not among the module's configured functions", function)
	}
	in, err := m.get(ctx)
	if err != nil {
		return nil, err
	}
	base, ok := ctx.Value(stateKeyType{}).(State)
	if !ok {
		base = m.state
	}
	changes := &overlay{base: base}
	callCtx, cancel := context.WithValue(ctx, overlayKeyType{}, changes), context.CancelFunc(func() {})
	if m.cfg.Timeout > 0 {
		callCtx, cancel = context.WithTimeout(callCtx, m.cfg.Timeout)
	}
	out, err := in.callBytes(callCtx, function, input)
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
	return out, nil
}

func (in *instance) callBytes(ctx context.Context, function string, input []byte) ([]byte, error) {
	in.stderr.Reset()
	fn, ok := in.fns[function]
	if !ok {
		if fn = in.mod.ExportedFunction(function); fn == nil {
			return nil, errors.New("no function " + function) // checked at load
		}
		if in.fns == nil {
			in.fns = map[string]api.Function{}
		}
		in.fns[function] = fn
	}
	in.stack[0] = uint64(len(input))
	if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(in.stack[0])
	if !in.mem.Write(ptr, input) {
		return nil, fmt.Errorf("%w: %s returned address %d, and %d bytes there are outside its memory (%d bytes)",
			ErrOutput, AllocExport, ptr, len(input), in.mem.Size())
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	optr, n := abi.Unpack(in.stack[0])
	view, ok := in.mem.Read(optr, n)
	if !ok {
		return nil, fmt.Errorf("%w: %s's result at address %d, %d bytes, is outside its memory (%d bytes)",
			ErrOutput, function, optr, n, in.mem.Size())
	}
	return bytes.Clone(view), nil
}
