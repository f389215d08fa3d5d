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
