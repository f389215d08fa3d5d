package influxdb

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// perQuery are the columns whose cells change from one query to the
// next for the same row: the yield's name, the table's index, and the
// range's bounds (its start is the cursor, its stop the query's now).
var perQuery = map[string]bool{"result": true, "table": true, "_start": true, "_stop": true}

// rowHash is a row's content, every cell but perQuery's, hashed
// (SHA-256, so that a row cannot be made to collide with another).
func rowHash(r row) [sha256.Size]byte {
	cols := make([]string, 0, len(r))
	for k := range r {
		if !perQuery[k] {
			cols = append(cols, k)
		}
	}
	slices.Sort(cols)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, k := range cols {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(r[k])))])
		h.Write([]byte(r[k]))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// rowKey is the identity of the occurrence-th (from 0) row of one query
// whose content hashes to sum: rows are told apart by what they hold,
// not by their place, which can differ between queries; rows that hold
// the same (a query that dropped what told them apart) by how many came
// before.
func rowKey(sum [sha256.Size]byte, occurrence uint64) uint64 {
	h := sha256.New()
	h.Write(sum[:])
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], occurrence)])
	var out [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(out[:0]))
}

// batch turns a query's rows into messages. It emits a row only if its
// time is at or before the horizon, the latest time an earlier, finished
// query saw: InfluxDB reads each series at its own moment during a query,
// so a query can see a point of one series and miss an earlier point of
// another written before it, but any point written before a point an
// earlier query saw is visible to this one. Rows at the cursor's time
// already emitted (s.seen, by rowKey) are skipped, whatever their place.
// The cursor moves to the latest time emitted; moved says the horizon
// moved, so that another query may emit what this one held back.
func (s *Source) batch(rows []row) (b *connector.Batch, moved bool, err error) {
	b = &connector.Batch{Schema: connector.SchemaJSON}
	if s.column != "" {
		b.Schema = map[string]connector.Schema{"json": connector.SchemaJSON, "text": connector.SchemaText, "raw": connector.SchemaRaw}[s.format]
	}
	horizon := s.horizon
	latest := s.cursor
	atLatest := map[uint64]bool{} // keys emitted, or skipped by place, at latest
	occurrences := map[[sha256.Size]byte]uint64{}
	skipped := uint64(0)
	for _, r := range rows {
		t, err := time.Parse(time.RFC3339Nano, r["_time"])
		if err != nil {
			return nil, false, fmt.Errorf("influxdb: a row's _time %q: the cursor needs a time in every row: %w", r["_time"], err)
		}
		if t.After(s.horizon) {
			s.horizon, moved = t, true
		}
		if t.After(horizon) {
			continue
		}
		sum := rowHash(r)
		key := rowKey(sum, occurrences[sum])
		occurrences[sum]++
		if t.Equal(s.cursor) {
			if s.seen[key] {
				continue
			}
			if skipped < s.skip { // a count-only state: its rows by place
				skipped++
				atLatest[key] = true
				continue
			}
		}
		payload, err := s.payload(r)
		if err != nil {
			return nil, false, err
		}
		var id [16]byte
		binary.BigEndian.PutUint64(id[:8], uint64(t.UnixNano()))
		binary.BigEndian.PutUint64(id[8:], key)
		b.Messages = append(b.Messages, connector.Message{ID: id, Payload: payload, OriginTimestamp: t})
		if t.After(latest) {
			latest, atLatest = t, map[uint64]bool{}
		}
		if t.Equal(latest) {
			atLatest[key] = true
		}
	}
	if len(b.Messages) == 0 {
		return b, moved, nil
	}
	if latest.Equal(s.cursor) {
		for k := range s.seen {
			atLatest[k] = true
		}
	}
	s.cursor, s.seen, s.skip = latest, atLatest, 0
	s.rows += uint64(len(b.Messages))
	ids := make([]string, 0, len(atLatest))
	for k := range atLatest {
		ids = append(ids, strconv.FormatUint(k, 16))
	}
	slices.Sort(ids)
	b.State, _ = json.Marshal(sourceState{Version: "v2", LastTimestamp: latest.UTC().Format(time.RFC3339Nano),
		ProcessedRows: s.rows, CursorRowCount: uint64(len(ids)), CursorRowIDs: ids})
	return b, moved, nil
}
