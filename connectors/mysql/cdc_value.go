package mysql

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/jsonx"
	"vitess.io/vitess/go/mysql/binlog"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// column is one column of a table as its TABLE_MAP describes it.
type column struct {
	name     string
	typ      byte   // the binlog type as sent (for decoding)
	rt       byte   // the real type (CHAR, ENUM or SET for a STRING)
	meta     uint16 // the type's metadata
	unsigned bool
	binary   bool     // bytes: base64 in JSON
	enum     []string // ENUM value names, index 1 first
	set      []string // SET member names, bit 0 first
	field    *querypb.Field
}

func (c *column) prepare(colType string) {
	t := querypb.Type_INT64
	switch {
	case c.unsigned:
		t = querypb.Type_UINT64
	case c.binary:
		t = querypb.Type_VARBINARY
	case isCharacter(c.rt):
		t = querypb.Type_VARCHAR
	}
	c.field = &querypb.Field{Name: c.name, Type: t, ColumnType: colType}
}

// appendRow appends {"name": value, ...} for the columns present in a
// row image (present is the event's column bitmap, nulls the row's NULL
// bitmap over the present columns), and returns how many bytes of data
// it used.
func appendRow(dst []byte, cols []column, present, nulls func(int) bool, data []byte) ([]byte, error) {
	dst = append(dst, '{')
	pos, k := 0, 0
	first := true
	for c := range cols {
		if !present(c) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		col := &cols[c]
		dst = jsonx.AppendString(dst, col.name)
		dst = append(dst, ':')
		if nulls(k) {
			k++
			dst = append(dst, "null"...)
			continue
		}
		k++
		v, n, err := binlog.CellValue(data, pos, col.typ, col.meta, col.field, false)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", col.name, err)
		}
		pos += n
		dst = appendValue(dst, col, v.Raw())
	}
	return append(dst, '}'), nil
}

// appendValue appends one decoded value as JSON, as the polling source
// writes it: numbers as numbers, binary as base64, times in RFC 3339,
// ENUM and SET by name, the rest as strings.
func appendValue(dst []byte, col *column, raw []byte) []byte {
	switch col.rt {
	case binlog.TypeTiny, binlog.TypeShort, binlog.TypeInt24, binlog.TypeLong, binlog.TypeLongLong,
		binlog.TypeNewDecimal, binlog.TypeYear:
		return append(dst, raw...)
	case binlog.TypeFloat, binlog.TypeDouble:
		bits := 64
		if col.rt == binlog.TypeFloat {
			bits = 32
		}
		f, err := strconv.ParseFloat(string(raw), bits)
		if err != nil {
			return jsonx.AppendString(dst, raw)
		}
		return strconv.AppendFloat(dst, f, 'g', -1, bits)
	case binlog.TypeBit, binlog.TypeGeometry:
		return appendBase64(dst, raw)
	case binlog.TypeEnum:
		i, err := strconv.Atoi(string(raw))
		switch {
		case err == nil && i == 0:
			return append(dst, `""`...)
		case err == nil && i <= len(col.enum):
			return jsonx.AppendString(dst, col.enum[i-1])
		}
		if err == nil {
			return append(dst, raw...) // names unknown: the index
		}
		return jsonx.AppendString(dst, raw)
	case binlog.TypeSet:
		bits, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil { // a SET sent with its own type: the bitmap's bytes
			bits = 0
			for i, b := range raw[:min(len(raw), 8)] {
				bits |= uint64(b) << (8 * i)
			}
		}
		if col.set == nil {
			return strconv.AppendUint(dst, bits, 10)
		}
		var names []string
		for i, n := range col.set {
			if bits&(1<<i) != 0 {
				names = append(names, n)
			}
		}
		return jsonx.AppendString(dst, strings.Join(names, ","))
	case binlog.TypeDate, binlog.TypeNewDate:
		if len(raw) == 10 && string(raw) != "0000-00-00" {
			dst = append(append(append(dst, '"'), raw...), "T00:00:00Z\""...)
			return dst
		}
		return jsonx.AppendString(dst, raw)
	case binlog.TypeDateTime, binlog.TypeDateTime2, binlog.TypeTimestamp, binlog.TypeTimestamp2:
		return appendTime(dst, raw)
	case binlog.TypeJSON:
		return append(dst, raw...)
	}
	if col.binary {
		return appendBase64(dst, raw)
	}
	return jsonx.AppendString(dst, raw)
}

// appendTime turns "2006-01-02 15:04:05[.000000]" into RFC 3339 in UTC
// (trailing fraction zeros dropped), as the polling source prints times;
// zero dates stay as the server prints them.
func appendTime(dst []byte, raw []byte) []byte {
	if len(raw) < 19 || raw[10] != ' ' || strings.HasPrefix(string(raw), "0000-00-00") {
		return jsonx.AppendString(dst, raw)
	}
	frac := raw[19:]
	if len(frac) > 0 {
		frac = []byte(strings.TrimRight(string(frac), "0"))
		if len(frac) == 1 { // "." alone
			frac = nil
		}
	}
	dst = append(dst, '"')
	dst = append(dst, raw[:10]...)
	dst = append(dst, 'T')
	dst = append(dst, raw[11:19]...)
	dst = append(dst, frac...)
	return append(dst, `Z"`...)
}

func appendBase64(dst, raw []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, raw)
	return append(dst, '"')
}
