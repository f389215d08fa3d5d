package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// Upsert by key (Ferry: upsert_by_key = true, key_column = "key"). The
// table holds one row per message key, the key convention of
// docs/keys.md: the iggy.KeyHeader header, a string key, in the text
// column key_column (unique). A message writes its row with INSERT ...
// ON CONFLICT (key_column) DO UPDATE, which takes effect only when the
// message's iggy_offset is above the row's: a replay of an older batch
// (after a crash) never overwrites a newer value. A deletion marker
// (iggy.DeletedHeader = true) deletes the row, under the same guard.
// Within a batch only the message of highest offset per key is written.
//
// Offsets order the messages of one partition, so a key's messages must
// be in one partition (as sending by key does). A replay that starts
// before a deletion marker may put the deleted row back until it
// reaches the marker again; with ordering = "none" a marker could be
// applied before an older update of its key, so use "partition" (the
// default) or "key". A message without a key, with a binary key or a
// string key PostgreSQL's text cannot hold (a NUL byte) is a permanent
// failure (dead-lettered by on_error).

// lintUpsert checks the upsert keys.
func lintUpsert(s *connector.Settings, fail connector.FailFunc) {
	if !s.Bool("upsert_by_key") {
		if s.Has("key_column") {
			fail("key_column", "is only used with upsert_by_key = true")
		}
		return
	}
	if !s.Bool("include_metadata") {
		fail("upsert_by_key", "needs include_metadata = true: iggy_offset decides which message of a key is the latest")
	}
	if s.String("dedupe_by") == "offset" {
		fail("dedupe_by", `"offset" keeps every message; upsert_by_key keeps one row per key: choose one`)
	}
	col := s.String("key_column")
	if col == "" {
		fail("key_column", "is empty")
	}
	for _, c := range []string{"id", "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id",
		"iggy_checksum", "iggy_origin_timestamp", "payload", "created_at"} {
		if col == c {
			fail("key_column", "%q is a column the sink writes already: name another", col)
		}
	}
	if _, ok := s.StringMap("field_mappings")[col]; ok {
		fail("key_column", "%q is also a column of field_mappings", col)
	}
}

// rowKey is m's key as the key column holds it.
func rowKey(m *connector.Message) (string, error) {
	v, ok := m.Header(iggy.KeyHeader)
	switch {
	case !ok:
		return "", fmt.Errorf("upsert_by_key: the message has no %q header (see docs/keys.md)", iggy.KeyHeader)
	case v.Kind != header.KindString:
		return "", fmt.Errorf("upsert_by_key: the %q header is a %s, not a string: key_column is text", iggy.KeyHeader, v.Kind)
	case !utf8.Valid(v.Data) || strings.IndexByte(string(v.Data), 0) >= 0:
		return "", fmt.Errorf("upsert_by_key: the key is not UTF-8 text without NUL bytes, which key_column (text) needs")
	}
	return string(v.Data), nil
}

// isDeletion reports whether m is a deletion marker.
func isDeletion(m *connector.Message) bool {
	v, ok := m.Header(iggy.DeletedHeader)
	return ok && v.Bool()
}

// upsertClause is the ON CONFLICT clause of insertSQL with upsert: every
// written column but the key takes the new value when the new offset is
// higher (or the row has none).
func (s *sinkSettings) upsertClause(targets []string) string {
	key := quote(s.keyColumn)
	sets := make([]string, 0, len(targets))
	for _, t := range targets {
		if t != key {
			sets = append(sets, t+" = EXCLUDED."+t)
		}
	}
	return fmt.Sprintf("ON CONFLICT (%s) DO UPDATE SET %s WHERE t.iggy_offset IS NULL OR t.iggy_offset < EXCLUDED.iggy_offset",
		key, strings.Join(sets, ", "))
}

// deleteSQL deletes the rows of keys $1 whose offset is below the
// marker's, $2.
func (s *sinkSettings) deleteSQL() string {
	return fmt.Sprintf("DELETE FROM %s AS t USING unnest($1::text[], $2::bigint[]) AS d(k, o) "+
		"WHERE t.%s = d.k AND (t.iggy_offset IS NULL OR t.iggy_offset < d.o)", s.target(), quote(s.keyColumn))
}

// consumeByKey is Consume with upsert_by_key: the latest message of each
// key in the batch is upserted or, a deletion marker, deletes, in one
// transaction.
func (s *Sink) consumeByKey(ctx context.Context, b *connector.SinkBatch) error {
	failed := connector.MessageErrors{}
	type pick struct {
		i    int
		vals []any // nil for a deletion marker
	}
	latest := map[string]pick{}
	var order []string
	for i := range b.Messages {
		m := &b.Messages[i]
		k, err := rowKey(m)
		var vals []any
		if err == nil && !isDeletion(m) {
			vals, err = s.values(b, m)
		}
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		if p, ok := latest[k]; ok && b.Messages[p.i].Offset > m.Offset {
			continue
		} else if !ok {
			order = append(order, k)
		}
		latest[k] = pick{i, vals}
	}
	var rows [][]any
	var index []int
	var dels []string
	var delOffsets []int64
	for _, k := range order {
		p := latest[k]
		if p.vals == nil {
			dels, delOffsets = append(dels, k), append(delOffsets, int64(b.Messages[p.i].Offset))
			continue
		}
		rows, index = append(rows, p.vals), append(index, p.i)
	}
	err := retryTransient(ctx, s.set.maxRetries, s.set.retryDelay, func() error { return s.writeByKey(ctx, rows, dels, delOffsets) })
	if err != nil && isDataError(err) {
		// A value PostgreSQL rejects: find it row by row, then delete.
		err = s.isolate(ctx, rows, index, failed)
		if err == nil {
			err = retryTransient(ctx, s.set.maxRetries, s.set.retryDelay, func() error { return s.writeByKey(ctx, nil, dels, delOffsets) })
		}
	}
	if err != nil {
		return orUnavailable(fmt.Errorf("postgres sink: upsert %d rows and delete %d in %s: %w", len(rows), len(dels), s.set.target(), s.conn.scrubErr(err)))
	}
	level := slog.LevelDebug
	if s.set.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "wrote batch by key", "table", s.set.target(), "messages", len(b.Messages),
		"upserted", len(rows), "deleted", len(dels), "failed", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// writeByKey upserts rows and deletes the keys dels (each below its
// offset) in one transaction.
func (s *Sink) writeByKey(ctx context.Context, rows [][]any, dels []string, offsets []int64) error {
	if len(rows) == 0 && len(dels) == 0 {
		return nil
	}
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
	if len(dels) > 0 {
		if _, err := tx.Exec(ctx, s.set.deleteSQL(), dels, offsets); err != nil {
			return fmt.Errorf("delete by key: %w", err)
		}
	}
	return tx.Commit(ctx)
}
