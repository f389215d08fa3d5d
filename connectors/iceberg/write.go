package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/ferryhq/ferry/connector"
	"github.com/tidwall/gjson"
)

// offsetPrefix starts the snapshot summary properties that hold the
// Iggy offsets written so far: offsetPrefix + <connector key>/<stream>/
// <topic>/<partition> (each part path-escaped) → the last offset.
const offsetPrefix = "ferry.iggy-offset."

// group is the messages of a batch bound for one table.
type group struct {
	id   table.Identifier
	name string
	rows []int // indexes into the batch
}

// offsetKey is the summary property of a batch's partition.
func (s *Sink) offsetKey(b *connector.SinkBatch) string {
	return offsetPrefix + url.PathEscape(s.key) + "/" + url.PathEscape(b.Stream) + "/" +
		url.PathEscape(b.Topic) + "/" + strconv.FormatUint(uint64(b.Partition), 10)
}

// committedOffsets returns the Ferry offsets of the table's nearest
// snapshot that has any: every Ferry commit carries all of them forward,
// so that snapshot holds them all even when other writers committed
// since.
func committedOffsets(tbl *table.Table) map[string]string {
	meta := tbl.Metadata()
	out := map[string]string{}
	for snap, hops := tbl.CurrentSnapshot(), 0; snap != nil && hops < 100000; hops++ {
		if snap.Summary != nil {
			for k, v := range snap.Summary.Properties {
				if strings.HasPrefix(k, offsetPrefix) {
					out[k] = v
				}
			}
		}
		if len(out) > 0 || snap.ParentSnapshotID == nil {
			break
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	return out
}

// appendGroup appends g's rows that no snapshot holds yet, with the
// batch's last offset, in one commit; a commit that lost a race is
// redone on the reloaded table. Rows that do not fit the table's schema
// are added to failed (also when they were skipped as written before,
// so a replay dead-letters them again).
func (s *Sink) appendGroup(ctx context.Context, cat catalog.Catalog, b *connector.SinkBatch, g *group, failed connector.MessageErrors) error {
	key := s.offsetKey(b)
	last := b.Messages[len(b.Messages)-1].Offset
	for attempt := 0; ; attempt++ {
		tbl, err := cat.LoadTable(ctx, g.id)
		if err != nil {
			if errors.Is(err, catalog.ErrNoSuchTable) {
				return fmt.Errorf("iceberg: table %s is gone: %w", g.name, err)
			}
			return unavailable(ctx, fmt.Errorf("iceberg: load table %s: %w", g.name, err))
		}
		offsets := committedOffsets(tbl)
		done := int64(-1)
		if v, ok := offsets[key]; ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("iceberg: table %s: snapshot summary %s = %q is no offset", g.name, key, v)
			}
			done = int64(n)
		}
		rec, rejected, err := buildRecord(tbl, b, g.rows)
		if err != nil {
			return err
		}
		for i, e := range rejected {
			failed[i] = connector.Permanent(fmt.Errorf("iceberg: table %s: %w", g.name, e))
		}
		fresh := freshRows(b, g.rows, rejected, done)
		if rec == nil || fresh == 0 {
			if rec != nil {
				rec.Release()
			}
			s.debug(ctx, "nothing new for the table", "table", g.name, "offset", done, "last", last)
			return nil
		}
		if n := rec.NumRows(); int64(fresh) < n {
			// A partial replay: keep the new rows only.
			sliced := rec.NewSlice(n-int64(fresh), n)
			rec.Release()
			rec = sliced
		}
		props := iceberg.Properties{}
		for k, v := range offsets {
			props[k] = v
		}
		props[key] = strconv.FormatUint(last, 10)
		err = commit(ctx, tbl, rec, props)
		rec.Release()
		if err == nil {
			s.debug(ctx, "appended", "table", g.name, "rows", fresh, "offset", last)
			return nil
		}
		if attempt < s.st.retries && (errors.Is(err, table.ErrCommitFailed) || moved(ctx, cat, g.id, tbl)) {
			s.log.Info("iceberg commit lost a race; reloading the table", "table", g.name, "attempt", attempt+1)
			continue
		}
		return unavailable(ctx, fmt.Errorf("iceberg: commit to %s: %w", g.name, err))
	}
}

// moved reports whether the table's current snapshot is no longer the
// one tbl had: a commit failed because another writer committed first
// (the catalog reports a stale requirement as its own error, not
// always as table.ErrCommitFailed).
func moved(ctx context.Context, cat catalog.Catalog, id table.Identifier, tbl *table.Table) bool {
	now, err := cat.LoadTable(ctx, id)
	if err != nil {
		return false
	}
	a, b := tbl.CurrentSnapshot(), now.CurrentSnapshot()
	switch {
	case a == nil && b == nil:
		return false
	case a == nil || b == nil:
		return true
	}
	return a.SnapshotID != b.SnapshotID
}

// freshRows counts the rows of the record (the rows not rejected, in
// order) whose offset is above done; they are its last rows.
func freshRows(b *connector.SinkBatch, rows []int, rejected map[int]error, done int64) int {
	n := 0
	for _, i := range rows {
		if _, bad := rejected[i]; !bad && int64(b.Messages[i].Offset) > done {
			n++
		}
	}
	return n
}

// commit appends rec in a transaction pinned to the snapshot it was
// planned on: a concurrent commit fails it with ErrCommitFailed instead
// of being replayed over (which could append a replayed batch twice).
func commit(ctx context.Context, tbl *table.Table, rec arrow.RecordBatch, props iceberg.Properties) error {
	txn := tbl.NewTransaction()
	if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return err
	}
	defer rdr.Release()
	if err := txn.Append(ctx, rdr, props); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// buildRecord decodes the rows into a record of the table's current
// schema: fields by name, unknown fields ignored, missing optional
// columns null (as upstream's Arrow JSON reader). A row with a value of
// the wrong type or without a required column is rejected with the
// reason; rec is nil when every row is rejected.
func buildRecord(tbl *table.Table, b *connector.SinkBatch, rows []int) (arrow.RecordBatch, map[int]error, error) {
	sc := tbl.Schema()
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: table schema to Arrow: %w", err)
	}
	var required []string
	for _, f := range sc.Fields() {
		if f.Required {
			required = append(required, f.Name)
		}
	}
	bld := array.NewRecordBuilder(memory.DefaultAllocator, asc)
	defer bld.Release()
	rejected := map[int]error{}
	for _, i := range rows {
		p := b.Messages[i].Payload
		if err := checkRequired(p, required); err != nil {
			rejected[i] = err
			continue
		}
		if err := bld.UnmarshalJSON(p); err != nil {
			rejected[i] = fmt.Errorf("the record does not fit the table's schema: %w", err)
		}
	}
	if len(rejected) == len(rows) {
		return nil, rejected, nil
	}
	return bld.NewRecordBatch(), rejected, nil
}

func checkRequired(payload []byte, required []string) error {
	for _, name := range required {
		if v := gjson.GetBytes(payload, escapePath(name)); !v.Exists() || v.Type == gjson.Null {
			return fmt.Errorf("the record has no value for the required column %q", name)
		}
	}
	return nil
}

// unavailable marks err as the catalog or the store being unreachable,
// unless ctx ended.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return connector.Unavailable(err)
}

func (s *Sink) debug(ctx context.Context, msg string, args ...any) {
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, msg, args...)
}
