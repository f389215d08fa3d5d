package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tidwall/gjson"
)

// Sink is the postgres sink.
type Sink struct {
	conn    Connection
	set     *sinkSettings
	poolCfg *pgxpool.Config
	log     *slog.Logger

	pool       *pgxpool.Pool
	cols       []sinkColumn
	names      []string // the columns' names, for COPY
	insertCopy string

	closeOnce sync.Once
}

// NewSink builds a postgres sink; configuration errors name the key.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	parsed, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	set, conn := sinkSettingsFrom(parsed), connectionFrom(parsed)
	poolCfg, err := conn.poolConfig(parsed)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set.verbose = set.verbose || cfg.Verbose
	s := &Sink{conn: conn, set: set, poolCfg: poolCfg, log: log, cols: set.columns()}
	for _, col := range s.cols {
		s.names = append(s.names, col.name)
	}
	s.insertCopy = set.insertSQL(stageSource)
	return s, nil
}

// Open connects, creates the table when auto_create_table is set, and
// checks that the table has the columns written and a unique index that
// makes replays harmless.
func (s *Sink) Open(ctx context.Context) error {
	if s.set.copy {
		stage := s.set.stageSQL()
		s.poolCfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, stage)
			return err
		}
	}
	pool, err := s.conn.connect(ctx, s.poolCfg)
	if err != nil {
		return orUnavailable(fmt.Errorf("postgres sink: %w", err))
	}
	s.pool = pool
	if err := s.prepareTable(ctx); err != nil {
		pool.Close() // the runtime calls Close only after a successful Open
		s.pool = nil
		return orUnavailable(fmt.Errorf("postgres sink: %w", s.conn.scrubErr(err)))
	}
	s.log.Info("postgres sink connected", "server", describe(&s.poolCfg.ConnConfig.Config), "table", s.set.target())
	return nil
}

func (s *Sink) prepareTable(ctx context.Context) error {
	target := s.set.target()
	if s.set.autoCreate {
		if _, err := s.pool.Exec(ctx, s.set.createTableSQL()); err != nil {
			return fmt.Errorf("create table %s: %w", target, err)
		}
	}
	var exists *string
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1)::text", target).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", target, err)
	}
	if exists == nil {
		return fmt.Errorf("table %s does not exist; create it or set auto_create_table = true", target)
	}
	rows, err := s.pool.Query(ctx, "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped", target)
	if err != nil {
		return fmt.Errorf("columns of %s: %w", target, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("columns of %s: %w", target, err)
	}
	var missing []string
	for _, c := range s.cols {
		if !c.mapped && !contains(have, c.name) {
			missing = append(missing, c.name)
		}
	}
	for _, m := range s.set.mappings {
		if !contains(have, m.column) {
			missing = append(missing, m.column)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("table %s has no column %s (set include_* to false for columns the table lacks, or fix field_mappings)", target, strings.Join(missing, ", "))
	}
	var unique bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $1::regclass
		AND i.indisunique AND i.indpred IS NULL AND 0 <> ALL (i.indkey::int2[])
		AND (SELECT array_agg(a.attname::text) FROM pg_attribute a
		     WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)) <@ $2::text[])`,
		target, s.set.dedupeColumns()).Scan(&unique); err != nil {
		return fmt.Errorf("unique indexes of %s: %w", target, err)
	}
	if !unique && s.set.upsert {
		return fmt.Errorf("table %s has no unique index on %s, which upsert_by_key needs (ON CONFLICT): add one, or set auto_create_table = true on a new table",
			target, quote(s.set.keyColumn))
	}
	if !unique {
		s.log.Warn("the table has no unique index on the dedupe columns: a replay after a crash can insert duplicates",
			"table", target, "columns", s.set.dedupeColumns())
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Consume writes the batch in one transaction. Messages that cannot be
// written (bad JSON or text, a value PostgreSQL rejects) are reported
// per message as permanent failures; the rest are written. When
// PostgreSQL is down or overloaded (see unavailable) the error, after
// max_retries, is marked connector.Unavailable: nothing is dead-lettered.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if s.set.upsert {
		return s.consumeByKey(ctx, b) // sink_upsert.go
	}
	failed := connector.MessageErrors{}
	rows := make([][]any, 0, len(b.Messages))
	index := make([]int, 0, len(b.Messages))
	for i := range b.Messages {
		vals, err := s.values(b, &b.Messages[i])
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		rows = append(rows, vals)
		index = append(index, i)
	}
	if len(rows) > 0 {
		err := retryTransient(ctx, s.set.maxRetries, s.set.retryDelay, func() error { return s.write(ctx, rows) })
		switch {
		case err == nil:
		case isDataError(err):
			if err := s.isolate(ctx, rows, index, failed); err != nil {
				return orUnavailable(fmt.Errorf("postgres sink: %w", s.conn.scrubErr(err)))
			}
		default:
			return orUnavailable(fmt.Errorf("postgres sink: write %d rows to %s: %w", len(rows), s.set.target(), s.conn.scrubErr(err)))
		}
	}
	level := slog.LevelDebug
	if s.set.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "wrote batch", "table", s.set.target(), "messages", len(b.Messages), "failed", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// write inserts rows in one transaction, batch_size rows per statement.
func (s *Sink) write(ctx context.Context, rows [][]any) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for start := 0; start < len(rows); start += s.set.batchSize {
		chunk := rows[start:min(start+s.set.batchSize, len(rows))]
		if err := s.insert(ctx, tx, chunk, start+len(chunk) < len(rows)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func (s *Sink) insert(ctx context.Context, tx pgx.Tx, chunk [][]any, more bool) error {
	if s.set.copy {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{stageTable}, s.names, pgx.CopyFromRows(chunk)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.insertCopy); err != nil {
			return err
		}
		if more {
			_, err := tx.Exec(ctx, "DELETE FROM "+stageTable)
			return err
		}
		return nil
	}
	args := make([]any, 0, len(chunk)*len(s.cols))
	for _, r := range chunk {
		args = append(args, r...)
	}
	_, err := tx.Exec(ctx, s.set.insertSQL(s.set.valuesSource(len(chunk))), args...)
	return err
}

// isolate writes the rows one by one (each in a savepoint) to find those
// PostgreSQL rejects, which become permanent failures.
func (s *Sink) isolate(ctx context.Context, rows [][]any, index []int, failed connector.MessageErrors) error {
	one := s.set.insertSQL(s.set.valuesSource(1))
	return retryTransient(ctx, s.set.maxRetries, s.set.retryDelay, func() error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		bad := map[int]error{}
		for i, r := range rows {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, one, r...); err != nil {
				if !isDataError(err) {
					return err
				}
				bad[index[i]] = connector.Permanent(fmt.Errorf("rejected by %s: %w", s.set.target(), err))
				if err := sp.Rollback(ctx); err != nil {
					return err
				}
				continue
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		for i, e := range bad {
			failed[i] = e
		}
		return nil
	})
}

// isDataError reports a rejected value (SQLSTATE class 22 or 23), which
// no retry fixes.
func isDataError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

// unavailable reports whether err says PostgreSQL cannot take writes
// now, rather than that a row is bad: no connection (a connect failure,
// a connection refused, lost or timed out), a server shutting down or
// not yet accepting connections (57P), a connection exception (08),
// insufficient resources (53), a system error (58), or a serialization
// failure or deadlock (40001, 40P01) that the next try resolves. A connect
// failure counts whatever its cause: a wrong password is not a message's
// fault either.
func unavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch c := pe.Code; {
		case c == "40001", c == "40P01", strings.HasPrefix(c, "08"), strings.HasPrefix(c, "53"),
			strings.HasPrefix(c, "57P"), strings.HasPrefix(c, "58"):
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// orUnavailable marks err connector.Unavailable when it is (see
// unavailable).
func orUnavailable(err error) error {
	if unavailable(err) {
		return connector.Unavailable(err)
	}
	return err
}

// values are the column values of one message, in s.cols order.
func (s *Sink) values(b *connector.SinkBatch, m *connector.Message) ([]any, error) {
	vals := make([]any, 0, len(s.cols))
	vals = append(vals, idNumeric(m.ID))
	if s.set.meta {
		vals = append(vals, int64(m.Offset), m.Timestamp, b.Stream, b.Topic, int32(b.Partition))
	}
	if s.set.checksum {
		vals = append(vals, int64(m.Checksum))
	}
	if s.set.origin {
		vals = append(vals, m.OriginTimestamp)
	}
	if s.set.payload {
		switch s.set.format {
		case payloadJSON:
			if !json.Valid(m.Payload) {
				return nil, errors.New("payload is not valid JSON (payload_format = \"json\")")
			}
			vals = append(vals, json.RawMessage(m.Payload))
		case payloadText:
			if !utf8.Valid(m.Payload) || bytes.IndexByte(m.Payload, 0) >= 0 {
				return nil, errors.New("payload is not UTF-8 text without NUL bytes (payload_format = \"text\")")
			}
			vals = append(vals, string(m.Payload))
		default:
			vals = append(vals, m.Payload)
		}
	}
	if len(s.set.mappings) > 0 {
		rec, err := s.mapped(m.Payload)
		if err != nil {
			return nil, err
		}
		vals = append(vals, rec)
	}
	if s.set.upsert {
		k, err := rowKey(m)
		if err != nil {
			return nil, err
		}
		vals = append(vals, k)
	}
	return vals, nil
}

// mapped builds {"column": value, ...} from the payload's fields; absent
// fields are left out (NULL).
func (s *Sink) mapped(payload []byte) (json.RawMessage, error) {
	if !json.Valid(payload) {
		return nil, errors.New("field_mappings need a JSON payload; this one is not valid JSON")
	}
	rec := []byte{'{'}
	for _, m := range s.set.mappings {
		r := gjson.GetBytes(payload, m.path)
		if !r.Exists() {
			continue
		}
		if len(rec) > 1 {
			rec = append(rec, ',')
		}
		rec = pgjson.AppendStringS(rec, m.column)
		rec = append(rec, ':')
		rec = append(rec, r.Raw...)
	}
	return append(rec, '}'), nil
}

// idNumeric is the message id as upstream stores it: the u128 (Iggy's
// little-endian id bytes) as a decimal.
func idNumeric(id [16]byte) pgtype.Numeric {
	var be [16]byte
	for i := range id {
		be[15-i] = id[i]
	}
	return pgtype.Numeric{Int: new(big.Int).SetBytes(be[:]), Valid: true}
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): rows are keyed by the message id (or by stream, topic, partition and offset), so their order does not matter.
func (s *Sink) ConsumesOutOfOrder() {}

// Close closes the pool; it is idempotent.
func (s *Sink) Close(context.Context) error {
	s.closeOnce.Do(func() {
		if s.pool != nil {
			s.pool.Close()
		}
	})
	return nil
}

var _ connector.Sink = (*Sink)(nil)
