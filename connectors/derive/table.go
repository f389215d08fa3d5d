package derive

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// row is one input key's contribution with input = "changelog": the
// group its latest value is in and what each aggregate took from it.
// The rows are checkpointed with the groups (state.go).
type row struct {
	// Topic is the input "stream/topic": two topics are two tables.
	Topic string `json:"topic"`
	// Kind and Key are the key header's kind and bytes: a string key
	// and a binary key of the same bytes are two keys.
	Kind header.Kind `json:"kind"`
	Key  []byte      `json:"key"`
	// Group is the group's id (its key: no window in this mode).
	Group string `json:"group"`
	// Seq orders the rows by their last update: latest reads the row
	// updated last.
	Seq uint64 `json:"seq"`
	// Vals are, per aggregate, aggSpec.rowValue of the row; null when
	// the row gives that aggregate nothing.
	Vals []json.RawMessage `json:"vals"`
}

// rowID is a row's key in Sink.rows and group.rows.
func rowID(topic string, kind header.Kind, key []byte) string {
	return topic + "\x00" + string([]byte{byte(kind)}) + string(key)
}

func (r *row) id() string { return rowID(r.Topic, r.Kind, r.Key) }

// applyRow applies one message of a changelog input from topic
// ("stream/topic"): the message is its key's new row. The key's previous
// row, if any, is retracted first, so the key counts once, in the group
// of its latest value. A deletion marker, a value the filter does not
// keep, and a value that cannot be read (reported as an error) leave the
// key without a row.
func (d *Sink) applyRow(ctx context.Context, topic string, m *connector.Message) error {
	kv, ok := m.Header(iggy.KeyHeader)
	if !ok {
		return fmt.Errorf("offset %d: no %q header: with input = \"changelog\" every message is the latest value of its key", m.Offset, iggy.KeyHeader)
	}
	if len(kv.Data) == 0 {
		return fmt.Errorf("offset %d: an empty %q header", m.Offset, iggy.KeyHeader)
	}
	rid := rowID(topic, kv.Kind, kv.Data)
	if v, ok := m.Header(iggy.DeletedHeader); ok && v.Bool() {
		d.retract(rid)
		return nil
	}
	r, err := d.readRow(m)
	if err != nil || r == nil {
		d.retract(rid) // the key's latest value is this one, which counts nowhere
		return err
	}
	d.cp.Seq++
	r.Topic, r.Kind, r.Key, r.Seq = topic, kv.Kind, append([]byte(nil), kv.Data...), d.cp.Seq
	if old := d.rows[rid]; old != nil && old.Group == r.Group {
		err = d.replace(rid, old, r)
	} else {
		d.retract(rid)
		err = d.addRow(rid, r)
	}
	if err != nil {
		return fmt.Errorf("offset %d: %w", m.Offset, err)
	}
	d.stats.Applied++
	return nil
}

// replace puts row r in the place of old, the key's row in the same
// group: the new values go in before the old ones leave, so the group
// is never empty in between, and latest (whose row is now r) and an
// extreme that r equals or beats need no search among the group's rows.
func (d *Sink) replace(rid string, old, r *row) error {
	g := d.groups[r.Group]
	for i := range d.s.aggs {
		if r.Vals[i] != nil {
			if err := d.s.aggs[i].addRow(&g.Aggs[i], r.Vals[i], r.Seq); err != nil {
				return fmt.Errorf("%s: %w", d.s.aggs[i].text, err)
			}
		}
	}
	g.rows[rid], d.rows[rid] = r, r
	for i := range d.s.aggs {
		if old.Vals[i] != nil {
			// The value was added, so it reads again.
			_ = d.s.aggs[i].retractRow(&g.Aggs[i], i, old.Vals[i], old.Seq, g.rows)
		}
	}
	g.changed = true
	return nil
}

// readRow reads a message's row: its group and each aggregate's value;
// nil when the filter does not keep it.
func (d *Sink) readRow(m *connector.Message) (*row, error) {
	var doc any
	if err := json.Unmarshal(m.Payload, &doc); err != nil {
		return nil, fmt.Errorf("offset %d: the payload is not JSON: %v", m.Offset, err)
	}
	if d.s.filter != nil && !d.s.filter.match(doc) {
		d.stats.Filtered++
		return nil, nil
	}
	key, err := d.groupKey(m, doc)
	if err != nil {
		return nil, err
	}
	r := &row{Group: key, Vals: make([]json.RawMessage, len(d.s.aggs))}
	for i := range d.s.aggs {
		a := &d.s.aggs[i]
		if err := a.check(doc); err != nil {
			return nil, fmt.Errorf("offset %d: %w", m.Offset, err)
		}
		r.Vals[i] = a.rowValue(doc, m.Payload)
	}
	return r, nil
}

// addRow adds row r (whose key has no row now) to its group, a new one
// or one started again after its deletion.
func (d *Sink) addRow(rid string, r *row) error {
	g := d.groups[r.Group]
	if g == nil {
		g = &group{Key: r.Group}
		d.groups[r.Group] = g
	}
	if g.Deleted || g.rows == nil {
		g.Deleted, g.Aggs, g.rows = false, make([]aggState, len(d.s.aggs)), map[string]*row{}
	}
	for i := range d.s.aggs {
		if r.Vals[i] != nil {
			if err := d.s.aggs[i].addRow(&g.Aggs[i], r.Vals[i], r.Seq); err != nil {
				return fmt.Errorf("%s: %w", d.s.aggs[i].text, err)
			}
		}
	}
	g.rows[rid] = r
	g.changed = true
	d.rows[rid] = r
	return nil
}

// retract takes the key's row, if it has one, out of its group; a group
// left without rows is deleted (a deletion marker on the output).
func (d *Sink) retract(rid string) {
	r := d.rows[rid]
	if r == nil {
		return
	}
	delete(d.rows, rid)
	g := d.groups[r.Group]
	if g == nil || g.rows == nil {
		return // not reached: addRow and rebuild put every row in its group
	}
	delete(g.rows, rid)
	g.changed = true
	if len(g.rows) == 0 {
		g.Deleted, g.Aggs, g.rows = true, nil, nil
		return
	}
	for i := range d.s.aggs {
		if r.Vals[i] != nil {
			// The value was added, so it reads again.
			_ = d.s.aggs[i].retractRow(&g.Aggs[i], i, r.Vals[i], r.Seq, g.rows)
		}
	}
}

// rebuild puts the checkpoint's rows back into their groups: the
// per-group indexes (rows, the values of min, max and distinct_count,
// latest's row) are not saved, and neither are counts and extremes
// trusted from the file: they are computed again from the rows. Only
// the sums are kept as saved, so a sum that took values back has the
// same rounding as before the restart.
func (d *Sink) rebuild() error {
	d.rows = make(map[string]*row, len(d.cp.Rows))
	sums := map[*group][]float64{}
	for _, g := range d.groups {
		if g.Deleted {
			g.Aggs, g.UDAF = nil, nil // a tombstone keeps its version only
			continue
		}
		if g.Start != 0 || g.End != 0 {
			return fmt.Errorf("group %q has a window, which input = \"changelog\" does not make", g.id())
		}
		s := make([]float64, len(g.Aggs))
		for i := range g.Aggs {
			s[i] = g.Aggs[i].Sum
		}
		sums[g] = s
		g.Aggs, g.rows = make([]aggState, len(d.s.aggs)), map[string]*row{}
	}
	rows := append([]*row(nil), d.cp.Rows...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	for _, r := range rows {
		if len(r.Vals) != len(d.s.aggs) {
			return fmt.Errorf("row %q has %d values, the configuration %d aggregates", r.Key, len(r.Vals), len(d.s.aggs))
		}
		for i, v := range r.Vals {
			if string(v) == "null" {
				r.Vals[i] = nil
			}
		}
		rid := r.id()
		if d.rows[rid] != nil {
			return fmt.Errorf("row %q of %s twice", r.Key, r.Topic)
		}
		g := d.groups[r.Group]
		if g == nil || g.Deleted {
			return fmt.Errorf("row %q of %s is in group %q, which the checkpoint does not hold", r.Key, r.Topic, r.Group)
		}
		if err := d.addRow(rid, r); err != nil {
			return fmt.Errorf("row %q of %s: %w", r.Key, r.Topic, err)
		}
		g.changed = false
	}
	for g, s := range sums {
		if len(g.rows) == 0 {
			return fmt.Errorf("group %q has no row", g.Key)
		}
		for i := range g.Aggs {
			if i < len(s) && g.Aggs[i].N > 0 && (d.s.aggs[i].fn == "sum" || d.s.aggs[i].fn == "avg") {
				g.Aggs[i].Sum = s[i]
			}
		}
	}
	return nil
}
