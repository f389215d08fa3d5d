package wasm_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/transform/wasm"
	"github.com/ferryhq/ferry/transform/wasm/abi"
	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
	"github.com/stretchr/testify/require"
)

func guestBytes(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(wasmtest.GoGuest(t))
	require.NoError(t, err)
	return b
}

func newModule(t testing.TB, cfg wasm.Config) *wasm.Module {
	t.Helper()
	m, err := wasm.New(context.Background(), guestBytes(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func msgs(payloads ...string) []abi.Message {
	out := make([]abi.Message, len(payloads))
	for i, p := range payloads {
		out[i] = abi.Message{Payload: []byte(p)}
	}
	return out
}

func TestAddFieldReplaces(t *testing.T) {
	t.Parallel()
	m := newModule(t, wasm.Config{Function: "add_field", Config: []byte(`{"key":"via","value":"ferry"}`)})
	in := msgs(`{"n":1}`, `{}`, `not json`)
	in[0].Key, in[0].Timestamp = []byte("k1"), 1234
	in[0].Headers = []abi.Header{{KeyKind: 2, Key: []byte("h"), ValueKind: 2, Value: []byte("v")}}
	vs, err := m.Call(context.Background(), in)
	require.NoError(t, err)
	require.Len(t, vs, 3)
	require.Equal(t, abi.Replace, vs[0].Action)
	require.Equal(t, `{"n":1,"via":"ferry"}`, string(vs[0].Messages[0].Payload))
	require.Equal(t, "k1", string(vs[0].Messages[0].Key))
	require.Equal(t, int64(1234), vs[0].Messages[0].Timestamp)
	require.Equal(t, in[0].Headers, vs[0].Messages[0].Headers)
	require.Equal(t, `{"via":"ferry"}`, string(vs[1].Messages[0].Payload))
	require.Equal(t, abi.Fail, vs[2].Action)
	require.Equal(t, "the payload is not a JSON object", vs[2].Reason)
}

func TestDropSplitRouteAndCounters(t *testing.T) {
	t.Parallel()
	data := guestBytes(t)
	ctx := context.Background()
	drop, err := wasm.New(ctx, data, wasm.Config{Function: "drop_odd"})
	require.NoError(t, err)
	defer drop.Close(ctx)
	vs, err := drop.Call(ctx, msgs(`{"n":1}`, `{"n":2}`, `{"n":3}`))
	require.NoError(t, err)
	require.Equal(t, []abi.Action{abi.Drop, abi.Keep, abi.Drop}, actions(vs))
	require.Equal(t, map[string]int64{"dropped": 2}, drop.Counters())

	split, err := wasm.New(ctx, data, wasm.Config{Function: "split"})
	require.NoError(t, err)
	defer split.Close(ctx)
	vs, err = split.Call(ctx, msgs(`{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, abi.Split, vs[0].Action)
	require.Len(t, vs[0].Messages, 2)
	require.Equal(t, `{"n":1,"part":1}`, string(vs[0].Messages[0].Payload))
	require.Equal(t, `{"n":1,"part":2}`, string(vs[0].Messages[1].Payload))

	route, err := wasm.New(ctx, data, wasm.Config{Function: "route"})
	require.NoError(t, err)
	defer route.Close(ctx)
	vs, err = route.Call(ctx, msgs(`{}`))
	require.NoError(t, err)
	require.Equal(t, abi.Verdict{Action: abi.Route, Topic: "other"}, vs[0])
}

func actions(vs []abi.Verdict) []abi.Action {
	out := make([]abi.Action, len(vs))
	for i, v := range vs {
		out[i] = v.Action
	}
	return out
}

func TestKeyedStateAndLog(t *testing.T) {
	t.Parallel()
	st := wasm.NewMemState(0)
	m := newModule(t, wasm.Config{Function: "count", State: st})
	in := msgs(`a`, `b`, `c`)
	in[0].Key, in[1].Key, in[2].Key = []byte("x"), []byte("y"), []byte("x")
	for range 2 {
		vs, err := m.Call(context.Background(), in)
		require.NoError(t, err)
		require.Len(t, vs, 3)
	}
	require.Equal(t, map[string][]byte{"x": []byte("4"), "y": []byte("2")}, st.Snapshot())
}

func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	m := newModule(t, wasm.Config{Function: "keep"})
	vs, err := m.Call(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, vs)
}

func TestLimitsStopTheModule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fn, payload string
		cfg         wasm.Config
		want        error
		text        string
	}{
		{"spin", "spin", wasm.Config{Timeout: 200 * time.Millisecond}, wasm.ErrTimeout, "ran past its timeout (200ms)"},
		{"grow", "grow", wasm.Config{MemoryLimit: 32 << 20}, wasm.ErrMemoryLimit, "exceeded its memory limit (32 MiB)"},
		{"panic", "boom", wasm.Config{}, wasm.ErrTrap, "boom: the guest gave up"},
		{"garbage", "x", wasm.Config{}, wasm.ErrOutput, "outside its memory"},
		{"short", "x", wasm.Config{}, wasm.ErrOutput, "0 verdicts for a batch of 1 messages"},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Function = tc.fn
			m := newModule(t, cfg)
			_, err := m.Call(context.Background(), msgs(`{"n":1}`, tc.payload)[1:])
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.text)
			// The instance is gone; the next call gets a fresh one.
			if tc.want == wasm.ErrOutput {
				return // the function always answers so
			}
			vs, err := m.Call(context.Background(), msgs(`{"n":2}`))
			require.NoError(t, err)
			require.Equal(t, []abi.Action{abi.Keep}, actions(vs))
		})
	}
}

func TestCancelledCallIsNotTheModulesFault(t *testing.T) {
	t.Parallel()
	m := newModule(t, wasm.Config{Function: "spin", Timeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := m.Call(ctx, msgs("spin"))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, wasm.ErrTimeout) || errors.Is(err, wasm.ErrTrap))
}

func TestBadModules(t *testing.T) {
	t.Parallel()
	data := guestBytes(t)
	ctx := context.Background()
	_, err := wasm.New(ctx, data, wasm.Config{Function: "nope"})
	require.ErrorContains(t, err, `the module does not export the function "nope" (it exports `)
	_, err = wasm.New(ctx, data, wasm.Config{Function: "add_field", MemoryLimit: 1 << 16})
	require.ErrorContains(t, err, "min 43 pages (2 Mi) over limit of 1 pages (64 Ki)")
	_, err = wasm.New(ctx, []byte("\x00asm junk"), wasm.Config{})
	require.ErrorContains(t, err, "compile")
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	m := newModule(t, wasm.Config{Function: "add_field", MaxIdle: 2})
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			p := `{"n":` + strconv.Itoa(i) + `}`
			vs, err := m.Call(context.Background(), msgs(p))
			if err == nil && string(vs[0].Messages[0].Payload) != strings.TrimSuffix(p, "}")+`,"via":"wasm"}` {
				err = errors.New("wrong payload " + string(vs[0].Messages[0].Payload))
			}
			errs <- err
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}
