package mysql

import (
	"encoding/binary"
	"errors"
	"fmt"

	"vitess.io/vitess/go/mysql/binlog"
)

// collBinary is the binary collation: bytes, not text.
const collBinary = 63

// tableMeta is what a TABLE_MAP event's optional metadata says of the
// columns (binlog_row_metadata=FULL; MINIMAL gives only signedness and
// charsets, NO_LOG nothing).
type tableMeta struct {
	names    []string // one per column, or nil
	unsigned []bool   // one per column (numeric columns may be true)
	binary   []bool   // one per column: a character column in the binary charset
	enums    [][]string
	sets     [][]string // per column: ENUM/SET value names, or nil
	hasSign  bool
	hasChars bool
}

// Optional metadata field types (MySQL's Table_map_log_event, MariaDB's
// the same numbers).
const (
	metaSignedness       = 1
	metaDefaultCharset   = 2
	metaColumnCharset    = 3
	metaColumnName       = 4
	metaSetStrValue      = 5
	metaEnumStrValue     = 6
	metaEnumSetDefault   = 10
	metaEnumSetColumnSet = 11
)

// realType is a column's type with the real type of a STRING column
// (CHAR, ENUM or SET) taken from its metadata.
func realType(typ byte, meta uint16) byte {
	if typ == binlog.TypeString && meta>>8 != 0 {
		rt := byte(meta >> 8)
		if rt&0x30 != 0x30 { // a CHAR longer than 255 bytes keeps length bits here
			return binlog.TypeString
		}
		return rt
	}
	return typ
}

func isNumeric(typ byte) bool {
	switch typ {
	case binlog.TypeTiny, binlog.TypeShort, binlog.TypeInt24, binlog.TypeLong, binlog.TypeLongLong,
		binlog.TypeNewDecimal, binlog.TypeFloat, binlog.TypeDouble:
		return true
	}
	return false
}

// isCharacter says whether a column has a charset in the metadata's
// DEFAULT_CHARSET/COLUMN_CHARSET (ENUM and SET have theirs apart).
func isCharacter(rt byte) bool {
	switch rt {
	case binlog.TypeString, binlog.TypeVarString, binlog.TypeVarchar, binlog.TypeBlob,
		binlog.TypeTinyBlob, binlog.TypeMediumBlob, binlog.TypeLongBlob:
		return true
	}
	return false
}

// optionalMetadata returns the optional metadata of a TABLE_MAP event's
// body (after the common header; checksum stripped), or an error when
// the body is shorter than its own counts say.
func optionalMetadata(body []byte, tableIDLen int) ([]byte, int, error) {
	r := reader{b: body}
	r.skip(tableIDLen + 2) // table id, flags
	r.skip(int(r.byte()) + 1)
	r.skip(int(r.byte()) + 1) // database, table, each NUL-terminated
	cols := r.lenenc()
	if r.err != nil || cols > uint64(len(body)) {
		return nil, 0, errors.New("table map event: truncated before the column count")
	}
	r.skip(int(cols))
	r.skip(int(r.lenenc()))     // type metadata
	r.skip((int(cols) + 7) / 8) // NULL bitmap
	if r.err != nil {
		return nil, 0, errors.New("table map event: truncated in the column definitions")
	}
	return body[r.i:], int(cols), nil
}

// parseTableMeta decodes optional metadata for columns of types (real
// types, see realType).
func parseTableMeta(opt []byte, types []byte) (*tableMeta, error) {
	n := len(types)
	m := &tableMeta{unsigned: make([]bool, n), binary: make([]bool, n), enums: make([][]string, n), sets: make([][]string, n)}
	r := reader{b: opt}
	for r.i < len(opt) && r.err == nil {
		kind := r.byte()
		l := r.lenenc()
		if r.err != nil || l > uint64(len(opt)-r.i) {
			return nil, fmt.Errorf("optional metadata field %d: length %d exceeds the event", kind, l)
		}
		f := reader{b: opt[r.i : r.i+int(l)]}
		r.i += int(l)
		var err error
		switch kind {
		case metaSignedness:
			m.hasSign = true
			err = m.signedness(&f, types)
		case metaDefaultCharset:
			m.hasChars = true
			err = m.defaultCharset(&f, types)
		case metaColumnCharset:
			m.hasChars = true
			err = m.columnCharset(&f, types)
		case metaColumnName:
			m.names = make([]string, 0, n)
			for f.i < len(f.b) && f.err == nil {
				m.names = append(m.names, f.str())
			}
			if f.err == nil && len(m.names) != n {
				err = fmt.Errorf("%d column names for %d columns", len(m.names), n)
			}
		case metaSetStrValue, metaEnumStrValue:
			want := byte(binlog.TypeEnum)
			dst := m.enums
			if kind == metaSetStrValue {
				want, dst = binlog.TypeSet, m.sets
			}
			err = strValues(&f, types, want, dst)
		}
		if err == nil {
			err = f.err
		}
		if err != nil {
			return nil, fmt.Errorf("optional metadata field %d: %w", kind, err)
		}
	}
	return m, r.err
}

func (m *tableMeta) signedness(f *reader, types []byte) error {
	bit := 0
	for c, t := range types {
		if !isNumeric(t) {
			continue
		}
		if bit/8 >= len(f.b) {
			return errors.New("signedness bitmap shorter than the numeric columns")
		}
		m.unsigned[c] = f.b[bit/8]&(0x80>>(bit%8)) != 0
		bit++
	}
	return nil
}

func (m *tableMeta) defaultCharset(f *reader, types []byte) error {
	def := f.lenenc()
	over := map[uint64]uint64{}
	for f.i < len(f.b) && f.err == nil {
		idx := f.lenenc()
		over[idx] = f.lenenc()
	}
	k := uint64(0)
	for c, t := range types {
		if !isCharacter(t) {
			continue
		}
		coll, ok := over[k]
		if !ok {
			coll = def
		}
		m.binary[c] = coll == collBinary
		k++
	}
	return nil
}

func (m *tableMeta) columnCharset(f *reader, types []byte) error {
	for c, t := range types {
		if !isCharacter(t) {
			continue
		}
		m.binary[c] = f.lenenc() == collBinary
	}
	return nil
}

func strValues(f *reader, types []byte, want byte, dst [][]string) error {
	for c, t := range types {
		if t != want {
			continue
		}
		count := f.lenenc()
		if f.err != nil || count > uint64(len(f.b)) {
			return errors.New("value count exceeds the field")
		}
		vals := make([]string, count)
		for i := range vals {
			vals[i] = f.str()
		}
		dst[c] = vals
	}
	return nil
}

// reader reads a byte slice, remembering the first overrun.
type reader struct {
	b   []byte
	i   int
	err error
}

var errShort = errors.New("truncated")

func (r *reader) skip(n int) {
	if r.err == nil && (n < 0 || n > len(r.b)-r.i) {
		r.err = errShort
	}
	if r.err == nil {
		r.i += n
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.i >= len(r.b) {
		r.err = errShort
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

// lenenc reads a length-encoded integer.
func (r *reader) lenenc() uint64 {
	first := r.byte()
	n := 0
	switch first {
	case 0xfc:
		n = 2
	case 0xfd:
		n = 3
	case 0xfe:
		n = 8
	case 0xfb, 0xff:
		if r.err == nil {
			r.err = fmt.Errorf("length-encoded integer starts with %#x", first)
		}
		return 0
	default:
		return uint64(first)
	}
	if r.err != nil || n > len(r.b)-r.i {
		r.err = errShort
		return 0
	}
	var buf [8]byte
	copy(buf[:], r.b[r.i:r.i+n])
	r.i += n
	return binary.LittleEndian.Uint64(buf[:])
}

// str reads a length-encoded string.
func (r *reader) str() string {
	l := r.lenenc()
	if r.err != nil || l > uint64(len(r.b)-r.i) {
		r.err = errShort
		return ""
	}
	s := string(r.b[r.i : r.i+int(l)])
	r.i += int(l)
	return s
}
