package jsonx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func FuzzCheck(f *testing.F) {
	for _, d := range append(docs, bad...) {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		if strings.Contains(errString(err), "nested deeper") {
			return
		}
		if (err == nil) != json.Valid(b) {
			t.Fatalf("Check(%q) = %v, json.Valid = %v", b, err, json.Valid(b))
		}
		if err != nil {
			return
		}
		v, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse of valid %q: %v", b, err)
		}
		out := v.Append(nil)
		if !json.Valid(out) {
			t.Fatalf("Append of %q gave invalid %q", b, out)
		}
		ms, err := ScanObject(b, nil)
		if errors.Is(err, ErrNotObject) {
			return
		}
		if err != nil {
			t.Fatalf("ScanObject of valid %q: %v", b, err)
		}
		if len(ms) != len(v.Fields) {
			t.Fatalf("ScanObject found %d members, Parse %d", len(ms), len(v.Fields))
		}
		for i := range ms {
			if ms[i].Name() != v.Fields[i].Name {
				t.Fatalf("member %d: %q vs %q", i, ms[i].Name(), v.Fields[i].Name)
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzScanObjectChecked: on a valid object ScanObjectChecked finds the
// members ScanObject finds; on anything else it does not panic.
func FuzzScanObjectChecked(f *testing.F) {
	for _, d := range append(docs, bad...) {
		f.Add([]byte(d))
	}
	f.Add([]byte(`{"a":"x\\\"y","b":[1,{"c":"]}"}],"d":-1.5e3,"e":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, cerr := ScanObjectChecked(b, nil)
		if Check(b) != nil || !IsObject(b) {
			return // any answer but a panic
		}
		want, err := ScanObject(b, nil)
		if err != nil {
			t.Fatalf("ScanObject of valid %q: %v", b, err)
		}
		if cerr != nil {
			t.Fatalf("ScanObjectChecked(%q) = %v on a valid object", b, cerr)
		}
		if len(got) != len(want) {
			t.Fatalf("ScanObjectChecked(%q): %d members, ScanObject %d", b, len(got), len(want))
		}
		for i := range want {
			if string(got[i].Key) != string(want[i].Key) || string(got[i].Value) != string(want[i].Value) || got[i].Escaped != want[i].Escaped {
				t.Fatalf("ScanObjectChecked(%q) member %d = %q:%q, ScanObject %q:%q", b, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
			}
		}
	})
}
