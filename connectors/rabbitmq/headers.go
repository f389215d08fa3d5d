package rabbitmq

import (
	"encoding/binary"
	"math"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
)

// tableValue is an Iggy header value as an AMQP table value: strings as
// long strings, booleans, integers and floats as themselves, anything
// else (raw bytes, 128-bit integers) as a byte array of its data.
func tableValue(v connector.HeaderValue) any {
	d := v.Data
	switch {
	case v.Kind == header.KindString:
		return string(d)
	case v.Kind == header.KindBool && len(d) == 1:
		return d[0] == 1
	case v.Kind == header.KindInt8 && len(d) == 1:
		return int8(d[0])
	case v.Kind == header.KindInt16 && len(d) == 2:
		return int16(binary.LittleEndian.Uint16(d))
	case v.Kind == header.KindInt32 && len(d) == 4:
		return int32(binary.LittleEndian.Uint32(d))
	case v.Kind == header.KindInt64 && len(d) == 8:
		return int64(binary.LittleEndian.Uint64(d))
	case v.Kind == header.KindUint8 && len(d) == 1:
		return d[0]
	case v.Kind == header.KindUint16 && len(d) == 2:
		return binary.LittleEndian.Uint16(d)
	case v.Kind == header.KindUint32 && len(d) == 4:
		return binary.LittleEndian.Uint32(d)
	case v.Kind == header.KindUint64 && len(d) == 8 && binary.LittleEndian.Uint64(d) <= math.MaxInt64:
		return int64(binary.LittleEndian.Uint64(d))
	case v.Kind == header.KindFloat32 && len(d) == 4:
		return math.Float32frombits(binary.LittleEndian.Uint32(d))
	case v.Kind == header.KindFloat64 && len(d) == 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(d))
	}
	return append([]byte(nil), d...)
}

// headerValue is an AMQP table value as an Iggy header value; ok is false
// for nested tables and arrays, which have no header kind.
func headerValue(v any) (connector.HeaderValue, bool) {
	switch x := v.(type) {
	case string:
		return header.StringValue(x), true
	case []byte:
		return header.RawValue(x), true
	case bool:
		return header.BoolValue(x), true
	case int8:
		return header.Int64Value(int64(x)), true
	case int16:
		return header.Int64Value(int64(x)), true
	case int32:
		return header.Int64Value(int64(x)), true
	case int64:
		return header.Int64Value(x), true
	case int:
		return header.Int64Value(int64(x)), true
	case uint8:
		return header.Uint8Value(x), true
	case uint16:
		return header.Uint32Value(uint32(x)), true
	case uint32:
		return header.Uint32Value(x), true
	case float32:
		return header.Float64Value(float64(x)), true
	case float64:
		return header.Float64Value(x), true
	}
	return connector.HeaderValue{}, false
}
