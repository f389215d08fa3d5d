package clickhouse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
)

// column is one column an INSERT can write.
type column struct {
	name       string
	typ        *chType
	hasDefault bool // DEFAULT (or EPHEMERAL): a message may leave it out
	id         bool // id_column: takes the Iggy message id
}

const supportedTypes = "Int8-64, UInt8-64, Float32/64, String, FixedString(N), UUID, Date, DateTime, DateTime('zone'), " +
	"Decimal(P, S), Enum8/16, and Nullable(T), Array(T), LowCardinality(T) of those"

// fetchColumns reads the table's columns from system.columns (only the
// validated database and table identifiers are in the query).
// MATERIALIZED and ALIAS columns cannot be inserted and are left out.
func (s *Sink) fetchColumns(ctx context.Context) ([]column, error) {
	q := "SELECT name, type, default_kind FROM system.columns WHERE database = '" + s.database +
		"' AND table = '" + s.table + "' FORMAT JSONEachRow"
	out, err := s.post(ctx, s.endpointFor(q), nil)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", s.target, err)
	}
	var cols []column
	idFound := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Name        string `json:"name"`
			Type        string `json:"type"`
			DefaultKind string `json:"default_kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", s.target, err)
		}
		if r.DefaultKind == "MATERIALIZED" || r.DefaultKind == "ALIAS" {
			continue
		}
		t, err := parseType(r.Type)
		if err != nil {
			return nil, fmt.Errorf("insert_format = \"row_binary\": column %s of %s: %w (row_binary writes %s)",
				r.Name, s.target, err, supportedTypes)
		}
		c := column{name: r.Name, typ: t, hasDefault: r.DefaultKind != "", id: r.Name == s.idColumn}
		if c.id {
			idFound = true
			if err := checkIDType(t); err != nil {
				return nil, fmt.Errorf("id_column %q: column of type %s: %w", s.idColumn, t.name, err)
			}
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s not found, or it has no column an INSERT can write", s.target)
	}
	if s.idColumn != "" && !idFound {
		return nil, fmt.Errorf("id_column %q: %s has no such insertable column", s.idColumn, s.target)
	}
	return cols, nil
}

// checkIDType says whether a message id (a UUID) fits t.
func checkIDType(t *chType) error {
	if t.kind == kNullable {
		t = t.elem
	}
	if t.kind == kUUID || t.kind == kString || t.kind == kFixedString && t.size >= 36 {
		return nil
	}
	return errors.New("the message id needs UUID, String or FixedString(36)")
}

// encodeRow appends m as one RowBinary row of the columns not left out
// and returns the left-out columns (one byte per column, 1 if left out).
func encodeRow(buf []byte, cols []column, m *connector.Message) ([]byte, []byte, error) {
	obj, err := decodeObject(m.Payload)
	if err != nil {
		return buf, nil, err
	}
	omit := make([]byte, len(cols))
	for i := range cols {
		c := &cols[i]
		if c.id {
			buf, _ = encode(buf, uuid.UUID(m.ID).String(), c.typ) // type checked by checkIDType
			continue
		}
		v, present := obj[c.name]
		if v == nil && c.hasDefault && (!present || c.typ.kind != kNullable) {
			omit[i] = 1 // the server fills in the DEFAULT
			continue
		}
		if !present && c.typ.kind != kNullable {
			return buf, nil, fmt.Errorf("field %q is missing, and column %s %s is not Nullable and has no DEFAULT", c.name, c.name, c.typ.name)
		}
		if buf, err = encode(buf, v, c.typ); err != nil {
			return buf, nil, fmt.Errorf("field %q: %s does not fit column %s %s: %w", c.name, short(v), c.name, c.typ.name, err)
		}
	}
	return buf, omit, nil
}

// decodeObject decodes a payload that must be one JSON object, keeping
// numbers as their text.
func decodeObject(p []byte) (map[string]any, error) {
	if t := bytes.TrimLeft(p, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("the payload is not a JSON object, so it is no row")
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("the payload is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the payload is not JSON: data after the object")
	}
	return obj, nil
}

// quoteIdent quotes a column name from system.columns for the INSERT's
// column list.
func quoteIdent(name string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(name) + "`"
}

// insertQuery is the INSERT of the columns not left out.
func (s *Sink) insertQuery(omit []byte) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + s.target + " (")
	first := true
	for i, c := range s.columns {
		if omit[i] == 1 {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(quoteIdent(c.name))
	}
	b.WriteString(") FORMAT RowBinary")
	return b.String()
}

// consumeRowBinary encodes each message and inserts the rows, one INSERT
// per set of left-out columns (one, unless messages differ in which
// DEFAULT columns they leave out), in the order of their first message.
func (s *Sink) consumeRowBinary(ctx context.Context, b *connector.SinkBatch, failed connector.MessageErrors) error {
	var buf []byte
	spans := make([][2]int, len(b.Messages))
	var keys []string
	groups := map[string][]int{}
	omits := map[string][]byte{}
	for i := range b.Messages {
		start := len(buf)
		var omit []byte
		var err error
		buf, omit, err = encodeRow(buf, s.columns, &b.Messages[i])
		if err != nil {
			buf = buf[:start]
			failed[i] = connector.Permanent(err)
			continue
		}
		spans[i] = [2]int{start, len(buf)}
		k := string(omit)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
			omits[k] = omit
		}
		groups[k] = append(groups[k], i)
	}
	body := func(todo []int) []byte {
		var out []byte
		for _, i := range todo {
			out = append(out, buf[spans[i][0]:spans[i][1]]...)
		}
		return out
	}
	for _, k := range keys {
		if err := s.insert(ctx, s.endpointFor(s.insertQuery(omits[k])), groups[k], body, failed); err != nil {
			return err
		}
	}
	return nil
}
