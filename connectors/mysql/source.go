package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/google/uuid"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "mysql",
		Aliases:   []string{"mariadb"},
		Summary:   "MySQL or MariaDB rows by polling a table on a tracking column, or MariaDB row changes from the binlog (mode = \"cdc\")",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// idSpace is the UUID namespace of message ids: SHA-1 of table and key.
var idSpace = uuid.MustParse("6c1e0f4e-3b8a-4f55-9d0e-6d7973716c00")

// position is where a table's reading stands: the last row read.
type position struct {
	Tracking string `json:"t"`
	Key      string `json:"k"`
}

// Source is the polling mysql source. Rows are read in (tracking_column,
// primary_key_column) order after the last row read; the State of a
// batch is every table's last row, so a restart reads on from the last
// batch in Iggy. Message ids are a UUID v5 of the table and the row's
// key, so a row read again (after a crash between sending and saving the
// state) carries the same id. delete_after_read and processed_column act
// in Ack, after the batch is in Iggy. With custom_query, the query (run
// once per table of tables when it uses $table, else once) replaces the
// generated one: its placeholders are bound as parameters, and the
// position is the last row's tracking_column and primary_key_column
// values, which $offset and $key bind.
type Source struct {
	conn *conn
	set  *sourceSettings
	log  *slog.Logger

	db   *sql.DB
	pos  map[string]position
	next int // table polled next
	mu   sync.Mutex
	keys map[*connector.Batch][]tableKeys
}

type tableKeys struct {
	table string
	keys  []any
}

// NewSource builds a mysql source; configuration errors name the key.
func NewSource(cfg connector.Config) (connector.Source, error) {
	parsed, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	c, err := connFrom(parsed)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if parsed.String("mode") == "cdc" {
		return newCDCSource(c, parsed, log), nil
	}
	return &Source{conn: c, set: sourceSettingsFrom(parsed), log: log, pos: map[string]position{},
		keys: map[*connector.Batch][]tableKeys{}}, nil
}

// Open connects and takes the saved positions.
func (s *Source) Open(ctx context.Context, state []byte) error {
	if len(state) > 0 {
		if err := json.Unmarshal(state, &s.pos); err != nil {
			return fmt.Errorf("mysql source: saved state %q: %w", state, err)
		}
	}
	db, err := s.conn.open(ctx)
	if err != nil {
		return orUnavailable(fmt.Errorf("mysql source: %w", err))
	}
	s.db = db
	s.log.Info("mysql source connected", "server", s.conn.describe(), "tables", s.set.tables,
		"custom_query", s.set.customQuery != "")
	return nil
}

// Poll returns the next rows of the first table (round robin) that has
// some, waiting poll_interval when none has.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		for range s.set.tables {
			table := s.set.tables[s.next]
			s.next = (s.next + 1) % len(s.set.tables)
			var b *connector.Batch
			err := s.conn.retry(ctx, func() error {
				var err error
				b, err = s.read(ctx, table)
				return err
			})
			if err != nil {
				return nil, orUnavailable(fmt.Errorf("mysql source: read %s: %w", s.describe(table), err))
			}
			if b != nil {
				return b, nil
			}
		}
		if err := backoff.Sleep(ctx, s.set.pollInterval); err != nil {
			return nil, err
		}
	}
}

// query is the SQL that reads table's next rows, and its arguments.
func (s *Source) query(table string) (string, []any) {
	p, seen := s.pos[table]
	if s.set.customQuery != "" {
		return s.set.customQueryFor(table, p, seen, time.Now())
	}
	q, _ := tableName(table)
	var where []string
	var args []any
	switch {
	case seen:
		where = append(where, fmt.Sprintf("(%[1]s > ? OR (%[1]s = ? AND %[2]s > ?))", s.set.tracking, s.set.pk))
		args = append(args, p.Tracking, p.Tracking, p.Key)
	case s.set.initialOffset != nil:
		where = append(where, s.set.tracking+" > ?")
		args = append(args, *s.set.initialOffset)
	}
	if s.set.processed != "" {
		where = append(where, "NOT COALESCE("+s.set.processed+", 0)")
	}
	query := "SELECT * FROM " + q
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	order := s.set.tracking
	if s.set.pk != s.set.tracking {
		order += ", " + s.set.pk
	}
	return query + " ORDER BY " + order + " LIMIT " + strconv.Itoa(s.set.batchSize), args
}

// describe names what is read for errors: the table, or custom_query.
func (s *Source) describe(table string) string {
	switch {
	case s.set.customQuery == "":
		return table
	case table == "":
		return "custom_query"
	}
	return "custom_query for " + table
}

// columns finds the tracking, key and payload columns in a result; -1
// for one that is missing and not needed.
func (s *Source) columns(table string, names []string) (trackIdx, pkIdx, payIdx int, err error) {
	trackIdx, pkIdx, payIdx = index(names, s.set.tracking), index(names, s.set.pk), -1
	what := s.describe(table)
	if s.set.customQuery == "" {
		what = "table " + table
		if trackIdx < 0 || pkIdx < 0 {
			return 0, 0, 0, fmt.Errorf("table %s has no column %s or %s (tracking_column, primary_key_column)", table, s.set.tracking, s.set.pk)
		}
	} else {
		u := s.set.uses
		if trackIdx < 0 && (u["$offset"] || u["$key"]) {
			return 0, 0, 0, fmt.Errorf("%s: tracking_column %s is not a column of the result, so $offset cannot move on", what, s.set.tracking)
		}
		if pkIdx < 0 && (u["$key"] || s.set.deleteAfter || s.set.processed != "") {
			return 0, 0, 0, fmt.Errorf("%s: primary_key_column %s is not a column of the result ($key, delete_after_read and processed_column need it)", what, s.set.pk)
		}
	}
	if s.set.payloadColumn != "" {
		pc, _ := ident(s.set.payloadColumn)
		if payIdx = index(names, pc); payIdx < 0 {
			return 0, 0, 0, fmt.Errorf("%s has no column %s (payload_column)", what, s.set.payloadColumn)
		}
	}
	return trackIdx, pkIdx, payIdx, nil
}

// read returns the rows of table after its position, or nil.
func (s *Source) read(ctx context.Context, table string) (*connector.Batch, error) {
	query, args := s.query(table)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.Name()
	}
	trackIdx, pkIdx, payIdx, err := s.columns(table, names)
	if err != nil {
		return nil, err
	}
	b := &connector.Batch{Schema: connector.SchemaJSON}
	if payIdx >= 0 {
		b.Schema = connector.SchemaRaw
	}
	var keys []any
	var last position
	moved := false
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var m connector.Message
		if pkIdx >= 0 {
			key := text(vals[pkIdx])
			keys = append(keys, vals[pkIdx])
			m.ID = uuid.NewSHA1(idSpace, []byte(table+"\x00"+key))
			// A custom query's row without a tracking value has no
			// place to resume from: the position stays.
			if trackIdx >= 0 && (s.set.customQuery == "" || vals[trackIdx] != nil) {
				last, moved = position{Tracking: text(vals[trackIdx]), Key: key}, true
			}
		} else if trackIdx >= 0 && vals[trackIdx] != nil {
			last, moved = position{Tracking: text(vals[trackIdx])}, true
		}
		if payIdx >= 0 {
			m.Payload = []byte(text(vals[payIdx]))
		} else {
			rec := make(map[string]any, len(names))
			for i, n := range names {
				rec[n] = jsonValue(types[i], vals[i])
			}
			if m.Payload, err = json.Marshal(orderedRecord{names, rec}); err != nil {
				return nil, fmt.Errorf("row of %s as JSON: %w", s.describe(table), err)
			}
		}
		b.Messages = append(b.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(b.Messages) == 0 {
		return nil, nil
	}
	if moved {
		s.pos[table] = last
	}
	state, err := json.Marshal(s.pos)
	if err != nil {
		return nil, err
	}
	b.State = state
	if len(keys) > 0 && s.set.deleteAfter || s.set.processed != "" {
		s.mu.Lock()
		s.keys[b] = []tableKeys{{table, keys}}
		s.mu.Unlock()
	}
	return b, nil
}

func index(names []string, quoted string) int {
	name := strings.ReplaceAll(quoted[1:len(quoted)-1], "``", "`")
	for i, n := range names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// text is a value as the server would print it.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	default:
		return fmt.Sprint(x)
	}
}

// jsonValue is a column's value in the row's JSON record: numbers as
// numbers, JSON as JSON, binary as base64, the rest as strings.
func jsonValue(t *sql.ColumnType, v any) any {
	b, ok := v.([]byte)
	if !ok {
		if tm, ok := v.(time.Time); ok {
			return tm.UTC().Format(time.RFC3339Nano)
		}
		return v
	}
	switch t.DatabaseTypeName() {
	case "JSON":
		if json.Valid(b) {
			return json.RawMessage(b)
		}
	case "DECIMAL", "INT", "BIGINT", "SMALLINT", "TINYINT", "MEDIUMINT", "UNSIGNED INT", "UNSIGNED BIGINT",
		"UNSIGNED SMALLINT", "UNSIGNED TINYINT", "UNSIGNED MEDIUMINT", "FLOAT", "DOUBLE", "YEAR":
		return json.Number(b)
	case "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "BIT", "GEOMETRY":
		return b // base64
	}
	return string(b)
}

// orderedRecord marshals a row's columns in the table's order.
type orderedRecord struct {
	names []string
	vals  map[string]any
}

func (r orderedRecord) MarshalJSON() ([]byte, error) {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, n := range r.names {
		if i > 0 {
			sb.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		v, err := json.Marshal(r.vals[n])
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", n, err)
		}
		sb.Write(k)
		sb.WriteByte(':')
		sb.Write(v)
	}
	sb.WriteByte('}')
	return []byte(sb.String()), nil
}

// Ack deletes or marks the batch's rows, now that they are in Iggy.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	s.mu.Lock()
	tks := s.keys[b]
	delete(s.keys, b)
	s.mu.Unlock()
	for _, tk := range tks {
		q, _ := tableName(tk.table)
		in := strings.TrimSuffix(strings.Repeat("?, ", len(tk.keys)), ", ")
		stmt := "DELETE FROM " + q + " WHERE " + s.set.pk + " IN (" + in + ")"
		if s.set.processed != "" {
			stmt = "UPDATE " + q + " SET " + s.set.processed + " = 1 WHERE " + s.set.pk + " IN (" + in + ")"
		}
		if err := s.conn.retry(ctx, func() error { _, err := s.db.ExecContext(ctx, stmt, tk.keys...); return err }); err != nil {
			return fmt.Errorf("mysql source: after-read on %s: %w", tk.table, err)
		}
	}
	return nil
}

// Nack keeps the batch's keys: the runtime sends the same batch again and
// acknowledges it then.
func (s *Source) Nack(context.Context, *connector.Batch, error) {}

// Close closes the pool.
func (s *Source) Close(context.Context) error {
	if s.db != nil {
		err := s.db.Close()
		s.db = nil
		return err
	}
	return nil
}

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
)
