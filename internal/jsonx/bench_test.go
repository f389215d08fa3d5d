package jsonx

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

var benchDoc = func() []byte {
	var b strings.Builder
	b.WriteString(`{"id":1234567,"user":"alice","email":"alice@example.com","active":true,"score":98.6,"status":"pending",`)
	for i := 0; b.Len() < 1990; i++ {
		fmt.Fprintf(&b, `"field_%02d":{"n":%d,"s":"value %d with some text","ok":false},`, i, i*1000003, i)
	}
	b.WriteString(`"text":"end"}`)
	return []byte(b.String())
}()

func BenchmarkScanObject2KB(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	ms := make([]Member, 0, 64)
	for b.Loop() {
		var err error
		if ms, err = ScanObject(benchDoc, ms[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheck2KB(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if err := Check(benchDoc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdValid2KB(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !json.Valid(benchDoc) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkCheckLongStrings is a 200-byte record most of which is one
// string, as log lines and the pipeline benchmark's records are.
func BenchmarkCheckLongStrings(b *testing.B) {
	rec := []byte(`{"id":123456,"title":"Hello","name":"World","text":"` + strings.Repeat("lorem ipsum ", 11) + `"}`)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if err := Check(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanObjectChecked is ScanObject and ScanObjectChecked on a
// 200-byte record most of which is one string.
func BenchmarkScanObjectChecked(b *testing.B) {
	rec := []byte(`{"id":123456,"title":"Hello","name":"World","text":"` + strings.Repeat("lorem ipsum ", 11) + `"}`)
	ms := make([]Member, 0, 8)
	for _, c := range []struct {
		name string
		scan func([]byte, []Member) ([]Member, error)
	}{{"validating", ScanObject}, {"checked", ScanObjectChecked}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				if _, err := c.scan(rec, ms[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
