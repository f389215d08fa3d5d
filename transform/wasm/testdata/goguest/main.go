// Command goguest is the WebAssembly module of package wasm's tests,
// built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared. Each
// exported function is one behaviour; the tests pick one with the
// transform's function setting.
package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unsafe"

	"github.com/ferryhq/ferry/transform/wasm/abi"
	"github.com/ferryhq/ferry/transform/wasm/guest"
)

func main() {}

// each runs f on every message of a batch.
func each(ptr unsafe.Pointer, n uint32, f func(m *abi.Message) abi.Verdict) uint64 {
	return guest.Handle(ptr, n, func(batch []abi.Message) []abi.Verdict {
		out := make([]abi.Verdict, len(batch))
		for i := range batch {
			out[i] = f(&batch[i])
		}
		return out
	})
}

// withField is payload, a JSON object, with the member "key":value added
// at its end.
func withField(payload []byte, key string, value []byte) ([]byte, bool) {
	p := bytes.TrimRight(payload, " \t\r\n")
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return nil, false
	}
	out := make([]byte, 0, len(p)+len(key)+len(value)+4)
	out = append(out, p[:len(p)-1]...)
	if len(bytes.TrimSpace(p[1:len(p)-1])) > 0 {
		out = append(out, ',')
	}
	out = strconv.AppendQuote(out, key)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, '}'), true
}

// number is the integer member "n" of a JSON payload, as the tests' source
// writes it ({"n":12}).
func number(p []byte) (int, bool) {
	i := bytes.Index(p, []byte(`"n":`))
	if i < 0 {
		return 0, false
	}
	j := i + 4
	k := j
	for k < len(p) && p[k] >= '0' && p[k] <= '9' {
		k++
	}
	v, err := strconv.Atoi(string(p[j:k]))
	return v, err == nil
}

var fieldKey, fieldValue = "", []byte(nil)

// field reads the config {"key": ..., "value": ...} once.
func field() (string, []byte) {
	if fieldKey == "" {
		var c struct {
			Key   string
			Value json.RawMessage
		}
		_ = json.Unmarshal(guest.Config(), &c)
		fieldKey, fieldValue = c.Key, c.Value
		if fieldKey == "" {
			fieldKey = "via"
		}
		if len(fieldValue) == 0 {
			fieldValue = []byte(`"wasm"`)
		}
	}
	return fieldKey, fieldValue
}

//go:wasmexport keep
func keep(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(*abi.Message) abi.Verdict { return abi.Verdict{Action: abi.Keep} })
}

//go:wasmexport add_field
func addField(ptr unsafe.Pointer, n uint32) uint64 {
	key, value := field()
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		p, ok := withField(m.Payload, key, value)
		if !ok {
			return abi.Verdict{Action: abi.Fail, Reason: "the payload is not a JSON object"}
		}
		r := *m
		r.Payload = p
		return abi.Verdict{Action: abi.Replace, Messages: []abi.Message{r}}
	})
}

//go:wasmexport drop_odd
func dropOdd(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if v, ok := number(m.Payload); ok && v%2 == 1 {
			guest.Count("dropped", 1)
			return abi.Verdict{Action: abi.Drop}
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

//go:wasmexport split
func split(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		v := abi.Verdict{Action: abi.Split}
		for part := 1; part <= 2; part++ {
			p, ok := withField(m.Payload, "part", strconv.AppendInt(nil, int64(part), 10))
			if !ok {
				return abi.Verdict{Action: abi.Fail, Reason: "the payload is not a JSON object"}
			}
			r := *m
			r.Payload = p
			v.Messages = append(v.Messages, r)
		}
		return v
	})
}

//go:wasmexport fail_odd
func failOdd(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if v, ok := number(m.Payload); ok && v%2 == 1 {
			return abi.Verdict{Action: abi.Fail, Reason: "odd number " + strconv.Itoa(v)}
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

//go:wasmexport route
func route(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(*abi.Message) abi.Verdict { return abi.Verdict{Action: abi.Route, Topic: "other"} })
}

// route_odd routes messages whose "n" is odd to the topic the config's
// "topic" names ("odd" by default) and keeps the others.
//
//go:wasmexport route_odd
func routeOdd(ptr unsafe.Pointer, n uint32) uint64 {
	var c struct{ Topic string }
	_ = json.Unmarshal(guest.Config(), &c)
	if c.Topic == "" {
		c.Topic = "odd"
	}
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if v, ok := number(m.Payload); ok && v%2 == 1 {
			return abi.Verdict{Action: abi.Route, Topic: c.Topic}
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

// count keeps a count per key in the keyed state and adds it to each
// message as the header "count".
//
//go:wasmexport count
func count(ptr unsafe.Pointer, n uint32) uint64 {
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		c := 0
		if v, ok := guest.StateGet(m.Key); ok {
			c, _ = strconv.Atoi(string(v))
		}
		c++
		guest.StatePut(m.Key, strconv.AppendInt(nil, int64(c), 10))
		r := *m
		r.Headers = append(append([]abi.Header(nil), m.Headers...),
			abi.Header{KeyKind: 2, Key: []byte("count"), ValueKind: 2, Value: strconv.AppendInt(nil, int64(c), 10)})
		guest.Log(guest.Info, "counted "+string(m.Key))
		return abi.Verdict{Action: abi.Replace, Messages: []abi.Message{r}}
	})
}

// trigger is the config's "trigger" string, or def.
func trigger(def string) []byte {
	var c struct{ Trigger string }
	_ = json.Unmarshal(guest.Config(), &c)
	if c.Trigger == "" {
		return []byte(def)
	}
	return []byte(c.Trigger)
}

// spin loops forever on a message containing the trigger ("spin"), else
// keeps.
//
//go:wasmexport spin
func spin(ptr unsafe.Pointer, n uint32) uint64 {
	t := trigger("spin")
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if bytes.Contains(m.Payload, t) {
			for {
			}
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

var hoard [][]byte

// grow allocates without bound on a message containing the trigger
// ("grow").
//
//go:wasmexport grow
func grow(ptr unsafe.Pointer, n uint32) uint64 {
	t := trigger("grow")
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if bytes.Contains(m.Payload, t) {
			for {
				hoard = append(hoard, make([]byte, 1<<20))
			}
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

//go:wasmexport panic
func panicky(ptr unsafe.Pointer, n uint32) uint64 {
	t := trigger("boom")
	return each(ptr, n, func(m *abi.Message) abi.Verdict {
		if bytes.Contains(m.Payload, t) {
			panic("boom: the guest gave up")
		}
		return abi.Verdict{Action: abi.Keep}
	})
}

// garbage returns an address outside memory.
//
//go:wasmexport garbage
func garbage(unsafe.Pointer, uint32) uint64 { return abi.Pack(0xFFFFFF00, 1024) }

// short returns verdicts for one message fewer than the batch.
//
//go:wasmexport short
func short(ptr unsafe.Pointer, n uint32) uint64 {
	return guest.Handle(ptr, n, func(batch []abi.Message) []abi.Verdict {
		return make([]abi.Verdict, max(len(batch)-1, 0))
	})
}
