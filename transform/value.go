package transform

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// FieldValue is upstream's field value: `value.static = <any TOML value>`
// or `value.computed = "<name>"`.
type FieldValue struct {
	Static   json.RawMessage `json:"static,omitempty"`
	Computed string          `json:"computed,omitempty"`
}

// computedValues are upstream's computed value names.
var computedValues = map[string]func(now time.Time) []byte{
	"date_time":         func(now time.Time) []byte { return strconv.AppendQuote(nil, now.UTC().Format(time.RFC3339Nano)) },
	"timestamp_nanos":   func(now time.Time) []byte { return strconv.AppendInt(nil, now.UnixNano(), 10) },
	"timestamp_micros":  func(now time.Time) []byte { return strconv.AppendInt(nil, now.UnixMicro(), 10) },
	"timestamp_millis":  func(now time.Time) []byte { return strconv.AppendInt(nil, now.UnixMilli(), 10) },
	"timestamp_seconds": func(now time.Time) []byte { return strconv.AppendInt(nil, now.Unix(), 10) },
	"uuid_v4":           func(time.Time) []byte { return strconv.AppendQuote(nil, uuid.New().String()) },
	"uuid_v7":           func(time.Time) []byte { return strconv.AppendQuote(nil, uuid.Must(uuid.NewV7()).String()) },
}

// compiledValue produces a field's JSON bytes.
type compiledValue struct {
	static  []byte
	compute func(time.Time) []byte
}

func (v compiledValue) bytes(now time.Time) []byte {
	if v.compute != nil {
		return v.compute(now)
	}
	return v.static
}

func compileValue(v FieldValue, where string) (compiledValue, error) {
	switch {
	case v.Computed != "" && v.Static != nil:
		return compiledValue{}, fmt.Errorf("%s: give value.static or value.computed, not both", where)
	case v.Computed != "":
		f, ok := computedValues[v.Computed]
		if !ok {
			return compiledValue{}, fmt.Errorf("%s.computed: %q is not a computed value (use date_time, timestamp_nanos, timestamp_micros, timestamp_millis, timestamp_seconds, uuid_v4, uuid_v7)", where, v.Computed)
		}
		return compiledValue{compute: f}, nil
	case v.Static != nil:
		return compiledValue{static: v.Static}, nil
	}
	return compiledValue{}, fmt.Errorf("%s: missing value.static or value.computed", where)
}
