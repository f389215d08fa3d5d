package transform

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
)

// valueField is upstream's field value: `value.static = <any TOML value>`
// or `value.computed = "<name>"`.
var valueField = connector.NewObjectField("value",
	connector.NewAnyField("static").WithDoc("the value, of any type"),
	connector.NewEnumField("computed", computedNames...).WithDoc("a value computed for each message"),
).Require().WithCheck(exactlyOne("static", "computed")).WithDoc("static or computed")

// keyField is the top-level field a value is set on.
var keyField = connector.NewStringField("key").Require().WithCheck(nonEmpty).WithDoc("the top-level field to set")

func nonEmpty(v any) error {
	if v == "" {
		return errors.New("expected a field name, got an empty string")
	}
	return nil
}

// computedValues are upstream's computed value names; each appends the
// value's JSON to dst.
var computedValues = map[string]func(dst []byte, now time.Time) []byte{
	"date_time":         appendDateTime,
	"timestamp_nanos":   func(dst []byte, now time.Time) []byte { return strconv.AppendInt(dst, now.UnixNano(), 10) },
	"timestamp_micros":  func(dst []byte, now time.Time) []byte { return strconv.AppendInt(dst, now.UnixMicro(), 10) },
	"timestamp_millis":  func(dst []byte, now time.Time) []byte { return strconv.AppendInt(dst, now.UnixMilli(), 10) },
	"timestamp_seconds": func(dst []byte, now time.Time) []byte { return strconv.AppendInt(dst, now.Unix(), 10) },
	"uuid_v4":           func(dst []byte, _ time.Time) []byte { return appendUUID(dst, uuid.New()) },
	"uuid_v7":           func(dst []byte, _ time.Time) []byte { return appendUUID(dst, uuid.Must(uuid.NewV7())) },
}

// computedNames are the keys of computedValues, in upstream's order.
var computedNames = []string{
	"date_time", "timestamp_nanos", "timestamp_micros", "timestamp_millis", "timestamp_seconds", "uuid_v4", "uuid_v7",
}

// appendDateTime writes the time as upstream's chrono to_rfc3339 does:
// UTC with a "+00:00" offset and 0, 3, 6 or 9 fraction digits.
func appendDateTime(dst []byte, now time.Time) []byte {
	now = now.UTC()
	dst = append(dst, '"')
	dst = now.AppendFormat(dst, "2006-01-02T15:04:05")
	switch ns := now.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		dst = appendFraction(dst, ns/1_000_000, 3)
	case ns%1_000 == 0:
		dst = appendFraction(dst, ns/1_000, 6)
	default:
		dst = appendFraction(dst, ns, 9)
	}
	return append(dst, `+00:00"`...)
}

func appendFraction(dst []byte, v, digits int) []byte {
	dst = append(dst, '.')
	var buf [9]byte
	for i := digits - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:digits]...)
}

func appendUUID(dst []byte, id uuid.UUID) []byte {
	var buf [36]byte
	const hex = "0123456789abcdef"
	j := 0
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			buf[j] = '-'
			j++
		}
		buf[j], buf[j+1] = hex[b>>4], hex[b&0xf]
		j += 2
	}
	dst = append(dst, '"')
	dst = append(dst, buf[:]...)
	return append(dst, '"')
}

// compiledValue produces a field's JSON bytes.
type compiledValue struct {
	static  []byte
	compute func(dst []byte, now time.Time) []byte
}

// compileValue reads a value table (valueField).
func compileValue(set *connector.Settings) (compiledValue, error) {
	if set.Has("computed") {
		return compiledValue{compute: computedValues[set.String("computed")]}, nil
	}
	raw, err := json.Marshal(set.Value("static"))
	if err != nil {
		return compiledValue{}, set.Errorf("static", "cannot be written as JSON: %v", err)
	}
	return compiledValue{static: raw}, nil
}
