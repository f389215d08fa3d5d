package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/jackc/pgx/v5"
)

// cursor is how far a table has been read: the last tracking value and,
// when primary_key_column differs from tracking_column, the last key (so
// rows sharing a tracking value are neither skipped nor repeated).
type cursor struct {
	Tracking string  `json:"tracking"`
	Key      *string `json:"key,omitempty"`
}

// pollState is the polling source's saved state.
type pollState struct {
	Mode    string            `json:"mode"`
	Offsets map[string]cursor `json:"offsets"`
	Rows    uint64            `json:"processed_rows"`
}

// rowWork is what Ack does for a table: delete or mark the rows read.
type rowWork struct {
	table string
	keys  []string
}

// poller is the polling mode.
type poller struct {
	s   *Source
	set *sourceSettings

	offsets map[string]cursor // read position, advanced by Poll
	rows    uint64
	idle    bool // the last poll found fewer than batch_size rows everywhere

	mu      sync.Mutex
	pending map[*connector.Batch][]rowWork
}

func newPoller(s *Source) *poller {
	return &poller{s: s, set: s.set, offsets: map[string]cursor{}, pending: map[*connector.Batch][]rowWork{}}
}

// decodePollState reads a saved state; nil or empty is a first run.
func decodePollState(state []byte) (pollState, error) {
	st := pollState{Mode: "polling", Offsets: map[string]cursor{}}
	if len(state) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(state, &st); err != nil || st.Mode != "polling" {
		return st, fmt.Errorf("saved state is not a polling state (%d bytes); delete the connector's state to start over", len(state))
	}
	if st.Offsets == nil {
		st.Offsets = map[string]cursor{}
	}
	return st, nil
}

func (p *poller) open(_ context.Context, state []byte) error {
	st, err := decodePollState(state)
	if err != nil || len(state) == 0 {
		return err
	}
	p.offsets, p.rows = st.Offsets, st.Rows
	p.s.log.Info("resuming polling", "offsets", len(p.offsets), "processed_rows", p.rows)
	return nil
}

// poll waits poll_interval when the previous poll caught up, then reads up
// to batch_size rows from each table; it blocks until some row is found.
func (p *poller) poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if p.idle {
			if err := backoff.Sleep(ctx, p.set.pollInterval); err != nil {
				return nil, err
			}
		}
		b, err := p.pollOnce(ctx)
		if err != nil || len(b.Messages) > 0 {
			return b, err
		}
	}
}

func (p *poller) schema() connector.Schema {
	switch p.set.payloadFormat {
	case formatBytea:
		return connector.SchemaRaw
	case formatText:
		return connector.SchemaText
	}
	return connector.SchemaJSON
}

func (p *poller) pollOnce(ctx context.Context) (*connector.Batch, error) {
	b := &connector.Batch{Schema: p.schema()}
	next := maps.Clone(p.offsets)
	var work []rowWork
	full := false
	targets := p.set.tables
	if len(targets) == 0 {
		targets = []string{""} // a custom query without $table
	}
	for _, table := range targets {
		res, err := p.pollTable(ctx, table, next)
		if err != nil {
			return nil, err
		}
		b.Messages = append(b.Messages, res.msgs...)
		if len(res.keys) > 0 && (p.set.deleteAfterRead || p.set.processedColumn != "") {
			work = append(work, rowWork{table: table, keys: res.keys})
		}
		full = full || len(res.msgs) >= p.set.batchSize
		if p.set.verbose {
			p.s.log.Info("polled", "table", table, "rows", len(res.msgs))
		}
	}
	p.idle = !full
	if len(b.Messages) == 0 {
		return b, nil
	}
	p.offsets = next
	p.rows += uint64(len(b.Messages))
	st, err := json.Marshal(pollState{Mode: "polling", Offsets: next, Rows: p.rows})
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	b.State = st
	if len(work) > 0 {
		p.mu.Lock()
		p.pending[b] = work
		p.mu.Unlock()
	}
	return b, nil
}

type tableResult struct {
	msgs []connector.Message
	keys []string // primary keys of the rows, for Ack
}

// pollTable reads one batch of a table and advances next[table].
func (p *poller) pollTable(ctx context.Context, table string, next map[string]cursor) (*tableResult, error) {
	sql, args, err := p.query(table, next)
	if err != nil {
		return nil, err
	}
	rows, err := p.s.pool.Query(ctx, sql, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("poll %s: %w", describeTarget(table), err)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	if len(fields) == 0 {
		// A query that failed (or whose context ended) before its first
		// row has no fields: say why, not that a column is missing.
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("poll %s: %w", describeTarget(table), err)
		}
	}
	trk, pk, payload := -1, -1, -1
	cols := make([]column, len(fields))
	for i, f := range fields {
		switch f.Name {
		case p.set.tracking:
			trk = i
		}
		if f.Name == p.set.pk {
			pk = i
		}
		if p.set.payloadFormat != formatRecord && f.Name == p.set.payloadColumn {
			payload = i
			continue
		}
		cols[i] = column{name: f.Name, oid: f.DataTypeOID}
		if p.set.snakeCase {
			cols[i].name = toSnakeCase(f.Name)
		}
	}
	if err := p.checkColumns(table, trk, pk, payload); err != nil {
		return nil, err
	}
	res := &tableResult{}
	now := time.Now()
	for rows.Next() {
		raw := rows.RawValues()
		msg, err := p.message(table, cols, fields[max(payload, 0)].DataTypeOID, payload, raw, now)
		if err != nil {
			return nil, err
		}
		msg.ID = rowID(table, raw, trk, pk)
		res.msgs = append(res.msgs, msg)
		if trk >= 0 && raw[trk] != nil {
			c := cursor{Tracking: string(raw[trk])}
			if p.composite() && pk >= 0 && raw[pk] != nil {
				k := string(raw[pk])
				c.Key = &k
			}
			next[table] = c
		}
		if pk >= 0 && raw[pk] != nil {
			res.keys = append(res.keys, string(raw[pk]))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("poll %s: %w", describeTarget(table), err)
	}
	return res, nil
}

func describeTarget(table string) string {
	if table == "" {
		return "custom_query"
	}
	return "table " + strconv.Quote(table)
}

func (p *poller) checkColumns(table string, trk, pk, payload int) error {
	needTracking := p.set.customQuery == "" || strings.Contains(p.set.customQuery, "$offset")
	switch {
	case needTracking && trk < 0:
		return fmt.Errorf("%s: tracking_column %q is not a column of the result", describeTarget(table), p.set.tracking)
	case (p.set.deleteAfterRead || p.set.processedColumn != "") && pk < 0:
		return fmt.Errorf("%s: primary_key_column %q is not a column of the result", describeTarget(table), p.set.pk)
	case p.set.payloadFormat != formatRecord && payload < 0:
		return fmt.Errorf("%s: payload_column %q is not a column of the result", describeTarget(table), p.set.payloadColumn)
	}
	return nil
}

// composite reports whether rows are ordered by (tracking, key).
func (p *poller) composite() bool { return p.set.pk != p.set.tracking && p.set.customQuery == "" }

// rowID is a row's message id: the XXH3-128 of the table, the tracking
// value and the primary key (every column when there is no key), so a row
// read again after a crash (the state saved before it) gets the same id
// and deduplication by id removes the repeat end to end; a row whose
// tracking value changed is a new message. Without a tracking column
// (a custom_query without $offset) rows have no position, and the id is
// left to the runtime.
func rowID(table string, raw [][]byte, trk, pk int) [16]byte {
	if trk < 0 || raw[trk] == nil {
		return [16]byte{}
	}
	h := xxh3.New()
	field := func(b []byte) {
		var n [8]byte
		size := uint64(len(b))
		if b == nil {
			size = ^uint64(0) // NULL is not ''
		}
		binary.LittleEndian.PutUint64(n[:], size)
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
	field([]byte("postgres-polling"))
	field([]byte(table))
	field(raw[trk])
	if pk >= 0 {
		field(raw[pk])
	} else {
		for _, v := range raw {
			field(v)
		}
	}
	return h.Sum128().Bytes()
}

// message encodes one row.
func (p *poller) message(table string, cols []column, payloadOID uint32, payload int, raw [][]byte, now time.Time) (connector.Message, error) {
	var out []byte
	switch p.set.payloadFormat {
	case formatRecord:
		data := appendObject(nil, p.s.types, cols, raw)
		if !p.set.includeMetadata {
			return connector.Message{Payload: data}, nil
		}
		e := envelope{table: table, op: "SELECT", ts: now, data: data}
		out = e.append(make([]byte, 0, len(data)+128))
	case formatBytea:
		if v := raw[payload]; v != nil {
			b, ok := pgjson.DecodeBytea(v)
			if !ok {
				b = append([]byte(nil), v...) // not bytea: its text
			}
			out = b
		}
	case formatText:
		out = append([]byte{}, raw[payload]...)
	case formatJSONDirect:
		v := raw[payload]
		if v != nil && json.Valid(v) {
			out = append([]byte(nil), v...)
		} else {
			out = p.s.types.AppendValue(nil, payloadOID, v)
		}
	}
	if out == nil {
		out = []byte{}
	}
	return connector.Message{Payload: out}, nil
}

// query builds the SQL for one table; values are always parameters.
func (p *poller) query(table string, offsets map[string]cursor) (string, []any, error) {
	cur, seen := offsets[table]
	if p.set.customQuery != "" {
		return p.customQuery(table, cur, seen)
	}
	trk := pgx.Identifier{p.set.tracking}.Sanitize()
	pk := pgx.Identifier{p.set.pk}.Sanitize()
	conds := []string{trk + " IS NOT NULL"}
	var args []any
	switch {
	case seen && p.composite() && cur.Key != nil:
		conds = append(conds, fmt.Sprintf("(%s, %s) > ($1, $2)", trk, pk))
		args = append(args, cur.Tracking, *cur.Key)
	case seen:
		conds = append(conds, trk+" > $1")
		args = append(args, cur.Tracking)
	case p.set.initialOffset != nil:
		conds = append(conds, trk+" > $1")
		args = append(args, *p.set.initialOffset)
	}
	if p.set.processedColumn != "" && !p.set.deleteAfterRead {
		conds = append(conds, pgx.Identifier{p.set.processedColumn}.Sanitize()+" IS NOT TRUE")
	}
	order := trk
	if p.composite() {
		order += ", " + pk
	}
	sql := fmt.Sprintf("SELECT * FROM %s WHERE %s ORDER BY %s LIMIT %d",
		tableIdent(table).Sanitize(), strings.Join(conds, " AND "), order, p.set.batchSize)
	return sql, args, nil
}

// customQuery substitutes upstream's placeholders: $table becomes the
// quoted table name, and $offset, $limit, $now and $now_unix (also inside
// single quotes, as upstream's examples write them) become parameters.
func (p *poller) customQuery(table string, cur cursor, seen bool) (string, []any, error) {
	offset := cur.Tracking
	if !seen && p.set.initialOffset != nil {
		offset = *p.set.initialOffset
	}
	now := time.Now().UTC()
	values := map[string]string{
		"$now_unix": strconv.FormatInt(now.Unix(), 10),
		"$now":      now.Format(time.RFC3339Nano),
		"$offset":   offset,
		"$limit":    strconv.Itoa(p.set.batchSize),
	}
	var args []any
	q := p.set.customQuery
	for _, name := range []string{"$now_unix", "$now", "$offset", "$limit"} {
		if !strings.Contains(q, name) {
			continue
		}
		args = append(args, values[name])
		ref := "$" + strconv.Itoa(len(args))
		q = strings.ReplaceAll(q, "'"+name+"'", ref)
		q = strings.ReplaceAll(q, name, ref)
	}
	if table != "" {
		q = strings.ReplaceAll(q, "$table", tableIdent(table).Sanitize())
	}
	return q, args, nil
}

// ack deletes or marks the rows of an acknowledged batch.
func (p *poller) ack(ctx context.Context, b *connector.Batch) error {
	p.mu.Lock()
	work := p.pending[b]
	delete(p.pending, b)
	p.mu.Unlock()
	var errs []error
	for _, w := range work {
		pk := pgx.Identifier{p.set.pk}.Sanitize()
		var sql string
		if p.set.deleteAfterRead {
			sql = fmt.Sprintf("DELETE FROM %s WHERE %s = ANY($1)", tableIdent(w.table).Sanitize(), pk)
		} else {
			sql = fmt.Sprintf("UPDATE %s SET %s = TRUE WHERE %s = ANY($1)", tableIdent(w.table).Sanitize(),
				pgx.Identifier{p.set.processedColumn}.Sanitize(), pk)
		}
		if err := p.s.retry(ctx, func() error {
			_, err := p.s.pool.Exec(ctx, sql, w.keys)
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("%s %d rows of %s read: %w",
				map[bool]string{true: "delete", false: "mark"}[p.set.deleteAfterRead], len(w.keys), w.table, err))
		}
	}
	return errors.Join(errs...)
}

// nack keeps the work: the runtime sends the batch again and then acks it.
func (p *poller) nack(*connector.Batch) {}

func (p *poller) close(context.Context) error { return nil }
