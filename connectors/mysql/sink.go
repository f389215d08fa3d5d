package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
)

// maxPlaceholders is the most ? one prepared statement may hold.
const maxPlaceholders = 65535

// Sink is the mysql sink.
type Sink struct {
	conn *conn
	set  *sinkSettings
	log  *slog.Logger

	db      *sql.DB
	cols    []string // quoted, in row order
	rowSQL  string   // "(?, ?, ...)"
	suffix  string   // ON DUPLICATE KEY UPDATE ...
	perStmt int      // rows per INSERT
}

// NewSink builds a mysql sink; configuration errors name the key.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	parsed, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	c, err := connFrom(parsed)
	if err != nil {
		return nil, err
	}
	set := sinkSettingsFrom(parsed)
	set.verbose = set.verbose || cfg.Verbose
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{conn: c, set: set, log: log}
	q := func(n string) string { v, _ := ident(n); return v }
	s.cols = []string{q(set.idCol)}
	if set.payload {
		s.cols = append(s.cols, q(set.payloadCol))
	}
	if set.meta {
		s.cols = append(s.cols, "`iggy_stream`", "`iggy_topic`", "`iggy_partition`", "`iggy_offset`", "`iggy_timestamp`")
	}
	for _, m := range set.mappings {
		s.cols = append(s.cols, q(m.column))
	}
	s.rowSQL = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(s.cols)), ", ") + ")"
	if set.update && len(s.cols) > 1 {
		var up []string
		for _, c := range s.cols[1:] {
			up = append(up, c+" = VALUES("+c+")")
		}
		s.suffix = " ON DUPLICATE KEY UPDATE " + strings.Join(up, ", ")
	} else {
		s.suffix = " ON DUPLICATE KEY UPDATE " + s.cols[0] + " = " + s.cols[0]
	}
	s.perStmt = min(set.batchSize, maxPlaceholders/len(s.cols))
	return s, nil
}

// Open connects, creates the table when auto_create_table is set and
// checks that it has the columns written.
func (s *Sink) Open(ctx context.Context) error {
	db, err := s.conn.open(ctx)
	if err != nil {
		return orUnavailable(fmt.Errorf("mysql sink: %w", err))
	}
	s.db = db
	if err := s.prepare(ctx); err != nil {
		db.Close()
		s.db = nil
		return orUnavailable(fmt.Errorf("mysql sink: %w", err))
	}
	s.log.Info("mysql sink connected", "server", s.conn.describe(), "table", s.set.tableRaw)
	return nil
}

func (s *Sink) createSQL() string {
	payload := map[payloadFormat]string{formatBinary: "LONGBLOB", formatText: "LONGTEXT", formatJSON: "JSON"}[s.set.format]
	defs := []string{s.cols[0] + " CHAR(36) CHARACTER SET ascii NOT NULL PRIMARY KEY"}
	i := 1
	if s.set.payload {
		defs = append(defs, s.cols[i]+" "+payload+" NULL")
		i++
	}
	if s.set.meta {
		defs = append(defs, "`iggy_stream` VARCHAR(255) NOT NULL", "`iggy_topic` VARCHAR(255) NOT NULL",
			"`iggy_partition` INT UNSIGNED NOT NULL", "`iggy_offset` BIGINT UNSIGNED NOT NULL",
			"`iggy_timestamp` DATETIME(6) NOT NULL")
		i += 5
	}
	for ; i < len(s.cols); i++ {
		defs = append(defs, s.cols[i]+" LONGTEXT NULL")
	}
	return "CREATE TABLE IF NOT EXISTS " + s.set.table + " (" + strings.Join(defs, ", ") +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
}

func (s *Sink) prepare(ctx context.Context) error {
	if s.set.autoCreate {
		if err := s.conn.retry(ctx, func() error { _, err := s.db.ExecContext(ctx, s.createSQL()); return err }); err != nil {
			return fmt.Errorf("create table %s: %w", s.set.tableRaw, err)
		}
	}
	var rows *sql.Rows
	err := s.conn.retry(ctx, func() error {
		var err error
		rows, err = s.db.QueryContext(ctx, "SELECT * FROM "+s.set.table+" LIMIT 0")
		return err
	})
	if err != nil {
		return fmt.Errorf("table %s: %w (create it or set auto_create_table = true)", s.set.tableRaw, err)
	}
	have, err := rows.Columns()
	rows.Close()
	if err != nil {
		return fmt.Errorf("columns of %s: %w", s.set.tableRaw, err)
	}
	set := map[string]bool{}
	for _, c := range have {
		set[strings.ToLower(c)] = true
	}
	var missing []string
	for _, c := range s.cols {
		name := strings.ReplaceAll(strings.Trim(c, "`"), "``", "`")
		if !set[strings.ToLower(name)] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("table %s has no column %s (fix id_column, payload_column or columns, or set include_metadata = false)",
			s.set.tableRaw, strings.Join(missing, ", "))
	}
	return nil
}

// Consume writes the batch, perStmt rows per INSERT. Messages that cannot
// be written (a payload that is not valid for payload_format, a row the
// server refuses) are reported one by one as permanent failures with the
// server's reason; the rest are written. When the server is down the
// error is marked connector.Unavailable and nothing is dead-lettered.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	failed := connector.MessageErrors{}
	rows := make([][]any, 0, len(b.Messages))
	index := make([]int, 0, len(b.Messages))
	for i := range b.Messages {
		vals, err := s.values(&b.Messages[i])
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		rows = append(rows, vals)
		index = append(index, i)
	}
	for start := 0; start < len(rows); start += s.perStmt {
		end := min(start+s.perStmt, len(rows))
		err := s.conn.retry(ctx, func() error { return s.insert(ctx, rows[start:end]) })
		switch {
		case err == nil:
		case dataError(err):
			// Find the rows the server refuses: one statement each.
			for j := start; j < end; j++ {
				err := s.conn.retry(ctx, func() error { return s.insert(ctx, rows[j:j+1]) })
				switch {
				case err == nil:
				case dataError(err):
					failed[index[j]] = connector.Permanent(fmt.Errorf("mysql sink: %s refused the row: %w", s.set.tableRaw, err))
				default:
					return orUnavailable(fmt.Errorf("mysql sink: write to %s: %w", s.set.tableRaw, err))
				}
			}
		default:
			return orUnavailable(fmt.Errorf("mysql sink: write %d rows to %s: %w", end-start, s.set.tableRaw, err))
		}
	}
	level := slog.LevelDebug
	if s.set.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "wrote batch", "table", s.set.tableRaw, "messages", len(b.Messages), "failed", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

func (s *Sink) insert(ctx context.Context, rows [][]any) error {
	var q strings.Builder
	q.WriteString("INSERT INTO " + s.set.table + " (" + strings.Join(s.cols, ", ") + ") VALUES ")
	args := make([]any, 0, len(rows)*len(s.cols))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(s.rowSQL)
		args = append(args, r...)
	}
	q.WriteString(s.suffix)
	_, err := s.db.ExecContext(ctx, q.String(), args...)
	return err
}

// values is a message's row, every value a placeholder argument.
func (s *Sink) values(m *connector.Message) ([]any, error) {
	row := make([]any, 0, len(s.cols))
	row = append(row, uuid.UUID(m.ID).String())
	if s.set.payload {
		switch s.set.format {
		case formatBinary:
			row = append(row, m.Payload)
		case formatText:
			if !utf8.Valid(m.Payload) {
				return nil, errors.New("mysql sink: payload is not UTF-8 (payload_format = \"text\")")
			}
			row = append(row, string(m.Payload))
		case formatJSON:
			if !json.Valid(m.Payload) {
				return nil, errors.New("mysql sink: payload is not valid JSON (payload_format = \"json\")")
			}
			row = append(row, string(m.Payload))
		}
	}
	if s.set.meta {
		row = append(row, m.Stream, m.Topic, m.Partition, m.Offset, m.Timestamp.UTC())
	}
	if len(s.set.mappings) > 0 {
		if !gjson.ValidBytes(m.Payload) {
			return nil, errors.New("mysql sink: payload is not JSON, so columns cannot be filled")
		}
		for _, mp := range s.set.mappings {
			r := gjson.GetBytes(m.Payload, mp.path)
			switch {
			case !r.Exists() || r.Type == gjson.Null:
				row = append(row, nil)
			case r.Type == gjson.String:
				row = append(row, r.Str)
			case r.Type == gjson.True:
				row = append(row, 1)
			case r.Type == gjson.False:
				row = append(row, 0)
			default:
				row = append(row, r.Raw)
			}
		}
	}
	return row, nil
}

// Close closes the pool.
func (s *Sink) Close(context.Context) error {
	if s.db != nil {
		err := s.db.Close()
		s.db = nil
		return err
	}
	return nil
}

var _ connector.Sink = (*Sink)(nil)
