package udaf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
	"github.com/ferryhq/ferry/udaf"
	"github.com/ferryhq/ferry/udaf/abi"
	"github.com/ferryhq/ferry/udaf/udaftest"
	"github.com/stretchr/testify/require"
)

func load(t testing.TB, path string, limits udaf.Limits) *udaf.Module {
	t.Helper()
	m, err := udaf.Load(context.Background(), path, limits)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

type entry struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// reference is the top-3 of inputs computed in Go: highest score first,
// equal scores by id.
func reference(inputs []entry) []entry {
	all := slices.Clone(inputs)
	slices.SortFunc(all, func(a, b entry) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return append([]entry{}, all[:min(len(all), 3)]...)
}

// randomInputs are n inputs over a few ids and scores, so equal scores and
// repeated ids occur, with some fractional and negative scores.
func randomInputs(r *rand.Rand, n int) []entry {
	out := make([]entry, n)
	for i := range out {
		score := float64(r.IntN(20) - 5)
		if r.IntN(3) == 0 {
			score = r.NormFloat64() * 1e3
		}
		out[i] = entry{ID: fmt.Sprintf("id-%d", r.IntN(12)), Score: score}
	}
	return out
}

// aggregate folds inputs as the derive connector may: split into random
// parts, each added to a state of its own from Init (by Add or AddAll at
// random), then the parts'
// states merged in a random grouping (an empty part merges Init's state).
func aggregate(ctx context.Context, m *udaf.Module, r *rand.Rand, inputs []entry) ([]byte, error) {
	var states [][]byte
	for len(inputs) > 0 || len(states) == 0 {
		k := min(len(inputs), r.IntN(8))
		st, err := m.Init(ctx)
		if err != nil {
			return nil, err
		}
		payloads := make([][]byte, k)
		for i, in := range inputs[:k] {
			payloads[i], _ = json.Marshal(in)
		}
		if r.IntN(2) == 0 { // one call for the part
			if st, err = m.AddAll(ctx, st, payloads); err != nil {
				return nil, err
			}
		} else {
			for _, p := range payloads {
				if st, err = m.Add(ctx, st, p); err != nil {
					return nil, err
				}
			}
		}
		inputs = inputs[k:]
		states = append(states, st)
	}
	for len(states) > 1 {
		i := r.IntN(len(states) - 1)
		merged, err := m.Merge(ctx, states[i], states[i+1])
		if err != nil {
			return nil, err
		}
		states = slices.Replace(states, i, i+2, merged)
	}
	return m.Emit(ctx, states[0])
}

func TestTop3MatchesGoReference(t *testing.T) {
	t.Parallel()
	m := load(t, udaftest.Top3(t), udaf.Limits{})
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const groups = 40
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for g := range groups {
		wg.Add(1)
		go func() { // groups at once: the module's pool serves them
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			inputs := randomInputs(r, r.IntN(60))
			out, err := aggregate(ctx, m, r, inputs)
			if err != nil {
				errs <- fmt.Errorf("group %d: %w", g, err)
				return
			}
			var got []entry
			if err := json.Unmarshal(out, &got); err != nil {
				errs <- fmt.Errorf("group %d: output %s: %w", g, out, err)
				return
			}
			if want := reference(inputs); !slices.Equal(got, want) {
				errs <- fmt.Errorf("group %d of %d inputs: got %s, want %v", g, len(inputs), out, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestTop3Output(t *testing.T) {
	t.Parallel()
	m := load(t, udaftest.Top3(t), udaf.Limits{})
	ctx := context.Background()
	st, err := m.Init(ctx)
	require.NoError(t, err)
	out, err := m.Emit(ctx, st)
	require.NoError(t, err)
	require.Equal(t, `[]`, string(out))
	for _, p := range []string{`{"id":"a","score":1}`, `{"id":"b","score":7.5}`, `{"id":"c","score":3}`, `{"id":"d","score":7.5}`, `{"id":"e","score":-2}`} {
		st, err = m.Add(ctx, st, []byte(p))
		require.NoError(t, err)
	}
	out, err = m.Emit(ctx, st)
	require.NoError(t, err)
	require.Equal(t, `[{"id":"b","score":7.5},{"id":"d","score":7.5},{"id":"c","score":3}]`, string(out))
}

func TestAggregateErrorsKeepTheInstance(t *testing.T) {
	t.Parallel()
	m := load(t, udaftest.Top3(t), udaf.Limits{})
	ctx := context.Background()
	st, err := m.Init(ctx)
	require.NoError(t, err)
	_, err = m.Add(ctx, st, []byte(`{"id":"a"}`))
	require.ErrorIs(t, err, udaf.ErrAggregate)
	var g *abi.GuestError
	require.ErrorAs(t, err, &g)
	require.Equal(t, `the input needs a string "id" and a number "score"`, g.Message)
	require.ErrorContains(t, err, `udaf module top3.wasm: udaf_add: the aggregate returned an error: the input needs`)
	_, err = m.Add(ctx, st, []byte(`not json`))
	require.ErrorContains(t, err, "udaf_add: the aggregate returned an error: the input is not a JSON object")
	_, err = m.Merge(ctx, st, []byte("garbage"))
	require.ErrorContains(t, err, "udaf module top3.wasm: udaf_merge: the aggregate returned an error: the state is not a top3 state")
	_, err = m.Emit(ctx, nil)
	require.ErrorContains(t, err, "udaf_emit: the aggregate returned an error: the state is not a top3 state")
	_, err = m.AddAll(ctx, st, [][]byte{[]byte(`{"id":"a","score":2}`), []byte(`{"score":1}`)})
	require.ErrorContains(t, err, `udaf module top3.wasm: udaf_add_all: the aggregate returned an error: input 1: the input needs`)
	st, err = m.Add(ctx, st, []byte(`{"id":"a","score":2}`))
	require.NoError(t, err)
	same, err := m.AddAll(ctx, st, nil)
	require.NoError(t, err)
	require.Equal(t, st, same)
	out, err := m.Emit(ctx, st)
	require.NoError(t, err)
	require.Equal(t, `[{"id":"a","score":2}]`, string(out))
}

func TestFaultsAreErrorsNamingTheModuleAndCall(t *testing.T) {
	t.Parallel()
	path := udaftest.Faulty(t)
	for _, tc := range []struct {
		input  string
		limits udaf.Limits
		want   error
		text   string
	}{
		{"trap", udaf.Limits{}, udaf.ErrTrap, "udaf module faulty.wasm: udaf_add: wasm module trapped: "},
		{"spin", udaf.Limits{CallTimeout: 200 * time.Millisecond}, udaf.ErrTimeout, "udaf module faulty.wasm: udaf_add: wasm module ran past its timeout (200ms)"},
		{"grow", udaf.Limits{Memory: 32 << 20}, udaf.ErrMemoryLimit, "udaf module faulty.wasm: udaf_add: wasm module exceeded its memory limit (32 MiB)"},
		{"fail", udaf.Limits{}, udaf.ErrAggregate, "udaf module faulty.wasm: udaf_add: the aggregate returned an error: fail: this input is refused"},
	} {
		t.Run(tc.input, func(t *testing.T) {
			t.Parallel()
			m := load(t, path, tc.limits)
			ctx := context.Background()
			st, err := m.Init(ctx)
			require.NoError(t, err)
			_, err = m.Add(ctx, st, []byte(tc.input))
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.text)
			if tc.want == udaf.ErrTrap {
				require.ErrorContains(t, err, "trap: the aggregate gave up")
			}
			// The module goes on: a new instance where the old one stopped.
			st, err = m.Add(ctx, st, []byte("x"))
			require.NoError(t, err)
			st, err = m.Merge(ctx, st, []byte("41"))
			require.NoError(t, err)
			out, err := m.Emit(ctx, st)
			require.NoError(t, err)
			require.Equal(t, "42", string(out))
		})
	}
}

func TestEmitMustBeJSON(t *testing.T) {
	t.Parallel()
	m := load(t, udaftest.Faulty(t), udaf.Limits{})
	ctx := context.Background()
	st, err := m.Add(ctx, []byte("0"), []byte("bad-emit"))
	require.NoError(t, err)
	_, err = m.Emit(ctx, st)
	require.ErrorIs(t, err, udaf.ErrOutput)
	require.ErrorContains(t, err, "udaf module faulty.wasm: udaf_emit: wasm module returned bad output: it returned 9 bytes that are not JSON")
}

func TestCancelledCall(t *testing.T) {
	t.Parallel()
	m := load(t, udaftest.Faulty(t), udaf.Limits{CallTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := m.Add(ctx, []byte("0"), []byte("spin"))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, udaf.ErrTimeout) || errors.Is(err, udaf.ErrTrap))
	require.ErrorContains(t, err, "udaf module faulty.wasm: udaf_add: ")
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := udaf.Load(ctx, filepath.Join(t.TempDir(), "missing.wasm"), udaf.Limits{})
	require.ErrorContains(t, err, "udaf module: open ")
	require.ErrorIs(t, err, os.ErrNotExist)

	junk := filepath.Join(t.TempDir(), "junk.wasm")
	require.NoError(t, os.WriteFile(junk, []byte("\x00asm junk"), 0o644))
	_, err = udaf.Load(ctx, junk, udaf.Limits{})
	require.ErrorContains(t, err, "udaf module junk.wasm ("+junk+"): compile")

	// A transform module is not an aggregate.
	_, err = udaf.Load(ctx, wasmtest.GoGuest(t), udaf.Limits{})
	require.ErrorContains(t, err, `udaf module goguest.wasm`)
	require.ErrorContains(t, err, `the module does not export the function "udaf_add"`)

	_, err = udaf.Load(ctx, udaftest.Top3(t), udaf.Limits{Memory: 1 << 16})
	require.ErrorContains(t, err, "udaf module top3.wasm")
	require.ErrorContains(t, err, "over limit of 1 pages")
}

func TestClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := udaf.Load(ctx, udaftest.Top3(t), udaf.Limits{})
	require.NoError(t, err)
	require.NoError(t, m.Close(ctx))
	require.NoError(t, m.Close(ctx))
	_, err = m.Init(ctx)
	require.ErrorContains(t, err, "udaf module top3.wasm: udaf_init: wasm module is closed")
}
