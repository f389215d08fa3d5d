package main

import (
	"encoding/json"
	"testing"
)

// The aggregate's functions run natively too: these tests need no wasm.

func TestAddMergeEmit(t *testing.T) {
	a, _ := initState()
	b, _ := initState()
	var err error
	for i, p := range []string{`{"id":"a","score":5}`, `{"id":"b","score":1}`, `{"id":"c","score":9}`, `{"id":"d","score":5}`} {
		if i%2 == 0 {
			a, err = add(a, []byte(p))
		} else {
			b, err = add(b, []byte(p))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := emit(st)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":"c","score":9},{"id":"a","score":5},{"id":"d","score":5}]`; string(out) != want {
		t.Fatalf("emitted %s, want %s", out, want)
	}
}

// FuzzState: a state from a checkpoint, however damaged, is refused with
// an error or is a state whose entries encode back to it; never a panic.
func FuzzState(f *testing.F) {
	st, _ := initState()
	f.Add(st)
	st, _ = add(st, []byte(`{"id":"x","score":1.5}`))
	f.Add(st)
	f.Add([]byte{4})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decode(b)
		if err != nil {
			return
		}
		if got := encode(es); string(got) != string(b) {
			t.Fatalf("%x decoded to %v, which encodes to %x", b, es, got)
		}
		if out, err := emit(b); err != nil || !json.Valid(out) {
			t.Fatalf("%x emitted %q, %v", b, out, err)
		}
	})
}
