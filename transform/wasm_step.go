package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/transform/wasm"
	"github.com/ferryhq/ferry/transform/wasm/abi"
)

// wasmStep is the wasm transform: a WebAssembly module (package wasm)
// called once per batch, with a verdict per message (docs/wasm.md).
//
//	[transforms.wasm]
//	enabled = true
//	module = "redact.wasm"      # relative to this file
//	function = "transform"
//	timeout = "2s"
//	memory_limit = "32MiB"
//	[transforms.wasm.config]   # passed to the module as JSON
//	field = "email"
//
// A message's key is its "key" header (iggy.KeyHeader); the other headers
// travel as headers. A replaced message keeps its id; of a split's
// messages the first keeps it and the others get new ones when sent. A
// route verdict sets the message's Route: on a source, the runtime sends it
// to that topic of each of the source's streams; on a sink it fails (a
// sink's messages are already in Iggy). The keyed state (state_get, state_put) is per
// connector and transform, checkpointed by the runtime with each batch
// (see Tx in state.go).
type wasmStep struct {
	mod   *wasm.Module
	name  string
	state *wasm.MemState
}

func (t *wasmStep) keyedState() *wasm.MemState { return t.state }

func (t *wasmStep) takeCounters() map[string]int64 { return t.mod.TakeCounters() }

// keyHeader is the header that carries a message's key (iggy.KeyHeader).
const keyHeader = "key"

var wasmSpec = connector.NewSpec(
	connector.NewStringField("module").Require().WithCheck(nonEmpty).WithExample("transform.wasm").
		WithDoc("the WebAssembly module (.wasm), relative to the configuration file"),
	connector.NewStringField("function").WithDefault(wasm.DefaultFunction).
		WithDoc("the exported function called once per batch"),
	connector.NewAnyField("config").WithCheck(isTable).
		WithDoc("a table passed to the module as JSON (host function config)"),
	connector.NewDurationField("timeout").WithDefault(wasm.DefaultTimeout).WithCheck(positiveDuration).
		WithDoc("the longest one call may run; the module is stopped after it"),
	connector.NewSizeField("memory_limit").WithDefault(int64(wasm.DefaultMemoryLimit)).WithCheck(atLeastPage).
		WithDoc("the most memory one instance of the module may have"),
	connector.NewBoolField("allow_clock").WithDefault(false).
		WithDoc("give the module the real clocks (it sees fake ones otherwise)"),
)

func isTable(v any) error {
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("expected a table, got %T", v)
	}
	return nil
}

func positiveDuration(v any) error {
	if d, _ := v.(time.Duration); d <= 0 {
		return errors.New("expected a duration above 0")
	}
	return nil
}

func atLeastPage(v any) error {
	if n, _ := v.(int64); n < 1<<16 {
		return errors.New("expected at least 64KiB (one WebAssembly page)")
	}
	return nil
}

func newWasm(b *buildContext) (Transform, error) {
	set, err := wasmSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	path := set.String("module")
	if !filepath.IsAbs(path) && b.baseDir != "" {
		path = filepath.Join(b.baseDir, path)
	}
	code, err := os.ReadFile(path)
	if err != nil {
		return nil, set.Errorf("module", "%v", err)
	}
	cfgJSON := []byte("{}")
	if v := set.Value("config"); v != nil {
		if cfgJSON, err = json.Marshal(v); err != nil {
			return nil, set.Errorf("config", "cannot pass it as JSON: %v", err)
		}
	}
	log := slog.Default().With("transform", "wasm", "module", path)
	if b.cfg.Source != "" {
		log = log.With("file", b.cfg.Source)
	}
	st := wasm.NewMemState(0)
	mod, err := wasm.New(context.Background(), code, wasm.Config{
		Function: set.String("function"), Config: cfgJSON, Timeout: set.Duration("timeout"),
		MemoryLimit: set.Size("memory_limit"), AllowClock: set.Bool("allow_clock"), Logger: log, State: st,
	})
	if err != nil {
		return nil, set.Errorf("module", "%s: %v", path, err)
	}
	return &wasmStep{mod: mod, name: "wasm", state: st}, nil
}

func (t *wasmStep) Name() string { return t.name }

// Close frees the module.
func (t *wasmStep) Close() error { return t.mod.Close(context.Background()) }

// Apply runs the module on one message; a split or route is an error
// here (the runtime applies chains with ApplyBatch).
func (t *wasmStep) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	outs, err := t.ApplyBatch(context.Background(), []connector.Message{*m}, schema)
	if err != nil {
		return schema, false, fmt.Errorf("transform %s: %w", t.name, err)
	}
	switch o := outs[0]; {
	case o.Err != nil:
		return schema, false, fmt.Errorf("transform %s: %w", t.name, o.Err)
	case o.Keep:
		return schema, true, nil
	case len(o.Out) == 0:
		return schema, false, nil
	case len(o.Out) == 1:
		*m = o.Out[0]
		return schema, true, nil
	}
	return schema, false, fmt.Errorf("transform %s: the module split a message, which needs a batch (Chain.ApplyBatch)", t.name)
}

// ApplyBatch calls the module once for msgs.
func (t *wasmStep) ApplyBatch(ctx context.Context, msgs []connector.Message, _ connector.Schema) ([]Outcome, error) {
	in := make([]abi.Message, len(msgs))
	for i := range msgs {
		in[i] = toABI(&msgs[i])
	}
	if st := stateFor(ctx, t); st != nil {
		ctx = wasm.WithState(ctx, st)
	}
	vs, err := t.mod.Call(ctx, in)
	if err != nil {
		return nil, err
	}
	outs := make([]Outcome, len(vs))
	for i, v := range vs {
		switch v.Action {
		case abi.Keep:
			outs[i].Keep = true
		case abi.Drop:
		case abi.Replace:
			outs[i].Out = []connector.Message{fromABI(&msgs[i], &v.Messages[0], true)}
		case abi.Split:
			outs[i].Out = make([]connector.Message, len(v.Messages))
			for k := range v.Messages {
				outs[i].Out[k] = fromABI(&msgs[i], &v.Messages[k], k == 0)
			}
		case abi.Route:
			r := msgs[i]
			r.Route = v.Topic
			outs[i].Out = []connector.Message{r}
		case abi.Fail:
			outs[i].Err = fmt.Errorf("the module failed the message: %s", v.Reason)
		}
	}
	return outs, nil
}

// toABI is m as the module sees it.
func toABI(m *connector.Message) abi.Message {
	am := abi.Message{Payload: m.Payload}
	if !m.OriginTimestamp.IsZero() {
		am.Timestamp = m.OriginTimestamp.UnixMicro()
	}
	for _, h := range m.Headers {
		if am.Key == nil && h.Key.Is(keyHeader) && (h.Value.Kind == header.KindString || h.Value.Kind == header.KindRaw) {
			am.Key = h.Value.Data
			continue
		}
		am.Headers = append(am.Headers, abi.Header{KeyKind: uint8(h.Key.Kind), Key: h.Key.Data,
			ValueKind: uint8(h.Value.Kind), Value: h.Value.Data})
	}
	return am
}

// fromABI is the message the module made of orig: orig's stream fields,
// the module's payload, headers, key and timestamp, and orig's id when
// keepID.
func fromABI(orig *connector.Message, am *abi.Message, keepID bool) connector.Message {
	r := *orig
	if !keepID {
		r.ID = [16]byte{}
	}
	r.Payload = am.Payload
	r.OriginTimestamp = time.Time{}
	if am.Timestamp != 0 {
		r.OriginTimestamp = time.UnixMicro(am.Timestamp)
	}
	r.Headers = make([]connector.Header, 0, len(am.Headers)+1)
	for _, h := range am.Headers {
		r.Headers = append(r.Headers, connector.Header{Key: header.Key{Kind: header.Kind(h.KeyKind), Data: h.Key},
			Value: header.Value{Kind: header.Kind(h.ValueKind), Data: h.Value}})
	}
	if len(am.Key) > 0 {
		kind := header.KindRaw
		if old, ok := orig.Header(keyHeader); ok && string(old.Data) == string(am.Key) {
			kind = old.Kind
		} else if utf8.Valid(am.Key) {
			kind = header.KindString
		}
		r.Headers = append(r.Headers, header.New(keyHeader, header.Value{Kind: kind, Data: am.Key}))
	}
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	return r
}

var (
	_ BatchTransform = (*wasmStep)(nil)
	_ keeper         = (*wasmStep)(nil)
	_ Transform      = (*wasmStep)(nil)
)
