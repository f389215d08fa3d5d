package pgjson

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/ferryhq/ferry/internal/jsonx"
)

// Type OIDs of the built-in types the mapping treats specially.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidXID         = 28
	oidCID         = 29
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
	oidJSONB       = 3802
	oidXID8        = 5069
	oidBox         = 603
)

// RuntimeParams are the session settings the mapping expects; set them on
// every connection whose text output is mapped (pgconn.Config.RuntimeParams).
func RuntimeParams() map[string]string {
	return map[string]string{
		"DateStyle":          "ISO",
		"IntervalStyle":      "iso_8601",
		"bytea_output":       "hex",
		"extra_float_digits": "3",
	}
}

type arrayType struct {
	elem  uint32
	delim byte
}

// Types knows which OIDs are arrays (and of what) and which are domains
// (and over what). NewTypes knows the built-in array types; Add* teach it
// a database's own types. Add* must not run concurrently with Append*.
type Types struct {
	arrays  map[uint32]arrayType
	domains map[uint32]uint32
}

// builtinArrays maps built-in array type OIDs to their element OIDs.
var builtinArrays = map[uint32]uint32{
	1000: oidBool, 1001: oidBytea, 1002: 18, 1003: 19, 1005: oidInt2, 1007: oidInt4,
	1009: 25, 1010: 27, 1011: oidXID, 1012: oidCID, 1014: 1042, 1015: 1043,
	1016: oidInt8, 1017: 600, 1018: 601, 1019: 602, 1020: oidBox, 1021: oidFloat4,
	1022: oidFloat8, 1027: 604, 1028: oidOID, 1040: 829, 1041: 869, 651: 650,
	1115: oidTimestamp, 1182: 1082, 1183: 1083, 1185: oidTimestamptz, 1187: 1186,
	1231: oidNumeric, 1270: 1266, 1561: 1560, 1563: 1562, 2951: 2950,
	199: oidJSON, 3807: oidJSONB, 271: oidXID8, 143: 142, 629: 628, 719: 718,
	791: 790, 775: 774, 3643: 3614, 4073: 4072, 1263: 2275,
	3905: 3904, 3907: 3906, 3909: 3908, 3911: 3910, 3913: 3912, 3927: 3926,
}

// NewTypes returns the built-in types.
func NewTypes() *Types {
	t := &Types{arrays: make(map[uint32]arrayType, len(builtinArrays)), domains: map[uint32]uint32{}}
	for a, e := range builtinArrays {
		t.AddArray(a, e, ',')
	}
	t.AddArray(1020, oidBox, ';') // box is the one built-in type with a ';' delimiter
	return t
}

// AddArray records that oid is an array of elem, whose text form separates
// elements with delim.
func (t *Types) AddArray(oid, elem uint32, delim byte) {
	t.arrays[oid] = arrayType{elem: elem, delim: delim}
}

// AddDomain records that oid is a domain over base.
func (t *Types) AddDomain(oid, base uint32) { t.domains[oid] = base }

// IsArray reports whether oid is a known array type.
func (t *Types) IsArray(oid uint32) bool {
	_, ok := t.arrays[t.base(oid)]
	return ok
}

func (t *Types) base(oid uint32) uint32 {
	for range 8 { // domains over domains, bounded
		b, ok := t.domains[oid]
		if !ok {
			return oid
		}
		oid = b
	}
	return oid
}

// AppendValue appends the JSON form of a value of type oid given in
// PostgreSQL's text format; nil text is SQL NULL.
func (t *Types) AppendValue(dst []byte, oid uint32, text []byte) []byte {
	if text == nil {
		return append(dst, "null"...)
	}
	oid = t.base(oid)
	if at, ok := t.arrays[oid]; ok {
		if out, ok := t.appendArray(dst, at, text); ok {
			return out
		}
		return AppendString(dst, text)
	}
	return t.appendScalar(dst, oid, text)
}

func (t *Types) appendScalar(dst []byte, oid uint32, v []byte) []byte {
	switch oid {
	case oidBool:
		switch string(v) {
		case "t":
			return append(dst, "true"...)
		case "f":
			return append(dst, "false"...)
		}
	case oidInt2, oidInt4, oidInt8, oidOID, oidXID, oidCID, oidXID8:
		if isNumber(v, false) {
			return append(dst, v...)
		}
	case oidFloat4, oidFloat8, oidNumeric:
		if isNumber(v, true) {
			return append(dst, v...)
		}
	case oidJSON, oidJSONB:
		var buf bytes.Buffer
		if json.Compact(&buf, v) == nil {
			return append(dst, buf.Bytes()...)
		}
	case oidBytea:
		if raw, ok := DecodeBytea(v); ok {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, raw)
			return append(dst, '"')
		}
	case oidTimestamptz:
		if ts, ok := parseTimestamptz(v); ok {
			dst = append(dst, '"')
			dst = ts.UTC().AppendFormat(dst, time.RFC3339Nano)
			return append(dst, '"')
		}
	case oidTimestamp:
		if isISOTimestamp(v) {
			dst = append(dst, '"')
			dst = append(dst, v[:10]...)
			dst = append(dst, 'T')
			dst = append(dst, v[11:]...)
			return append(dst, '"')
		}
	}
	return AppendString(dst, v)
}

// DecodeBytea decodes bytea's hex text form ("\x0a0b").
func DecodeBytea(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '\\' || v[1] != 'x' {
		return nil, false
	}
	out := make([]byte, hex.DecodedLen(len(v)-2))
	if _, err := hex.Decode(out, v[2:]); err != nil {
		return nil, false
	}
	return out, true
}

var tzLayouts = []string{"2006-01-02 15:04:05-07", "2006-01-02 15:04:05-07:00", "2006-01-02 15:04:05-07:00:00"}

func parseTimestamptz(v []byte) (time.Time, bool) {
	s := string(v)
	for _, l := range tzLayouts {
		if ts, err := time.Parse(l, s); err == nil {
			return ts, true
		}
	}
	return time.Time{}, false
}

// isISOTimestamp reports whether v is "YYYY-MM-DD HH:MM:SS[.fraction]".
func isISOTimestamp(v []byte) bool {
	if len(v) < 19 || v[10] != ' ' {
		return false
	}
	for i, c := range v {
		switch {
		case i == 4 || i == 7:
			if c != '-' {
				return false
			}
		case i == 10:
		case i == 13 || i == 16:
			if c != ':' {
				return false
			}
		case i == 19:
			if c != '.' || len(v) == 20 {
				return false
			}
		case c < '0' || c > '9':
			return false
		}
	}
	return true
}

// isNumber reports whether v is a JSON number; without frac, only an
// integer.
func isNumber(v []byte, frac bool) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(v) && v[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if !frac {
		return i == len(v)
	}
	if i < len(v) && v[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(v)
}

// AppendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s []byte) []byte { return jsonx.AppendString(dst, s) }

// AppendStringS is AppendString for a string.
func AppendStringS(dst []byte, s string) []byte { return jsonx.AppendString(dst, s) }
