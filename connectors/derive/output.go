package derive

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/OneOfOne/xxhash"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/google/uuid"
)

// idSpace is the UUID v5 namespace of output ids.
var idSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/ferryhq/ferry/connectors/derive"))

// outputID is UUID v5 of (connector key, group id, version): the same
// update of a group has the same id in every replay.
func outputID(connKey, gid string, version uint64) [16]byte {
	return uuid.NewSHA1(idSpace, []byte(connKey+"\x00"+gid+"\x00"+strconv.FormatUint(version, 10)))
}

// msTime formats Unix milliseconds as RFC 3339 in UTC.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// emit closes the windows past their lateness and returns one output per
// changed group (deletion markers for deleted or retracted ones), in
// group order; each output counts a version.
func (d *Sink) emit() []output {
	var gs []*group
	for id, g := range d.groups {
		if d.closed(g) {
			if d.s.retract && !g.Deleted {
				g.Deleted, g.changed = true, true
			} else if !g.changed {
				delete(d.groups, id)
				continue
			}
		}
		if g.changed && g.Deleted && d.s.changelog && (g.Version == 0 || g.outDeleted) {
			// Made (or made again) and emptied in one batch: the output
			// has nothing to delete.
			if g.Version == 0 {
				delete(d.groups, id)
			}
			g.changed = false
			continue
		}
		if g.changed {
			gs = append(gs, g)
		}
	}
	sort.Slice(gs, func(i, j int) bool { return less(gs[i], gs[j]) })
	outs := make([]output, 0, len(gs))
	for _, g := range gs {
		g.changed, g.outDeleted = false, g.Deleted
		g.Version++
		gid := g.id()
		o := output{ID: outputID(d.s.key, gid, g.Version), Key: gid, Deleted: g.Deleted,
			Partition: d.partitions[xxhash.ChecksumString32(gid)%uint32(len(d.partitions))]}
		if d.s.window > 0 {
			o.Window = msTime(g.Start)
		}
		o.Payload = d.payload(g)
		outs = append(outs, o)
		if d.closed(g) {
			delete(d.groups, gid) // its last word is out; no event reaches it again
		}
	}
	d.stats.Emitted += uint64(len(outs))
	return outs
}

// payload is a group's JSON value: {key, window_start, window_end,
// values...}, or {key, ..., deleted: true} for a deletion marker.
func (d *Sink) payload(g *group) json.RawMessage {
	b := []byte(`{"key":`)
	b = appendJSON(b, g.Key)
	if d.s.window > 0 {
		b = append(b, `,"window_start":`...)
		b = appendJSON(b, msTime(g.Start))
		b = append(b, `,"window_end":`...)
		b = appendJSON(b, msTime(g.End))
	}
	if g.Deleted {
		return append(b, `,"deleted":true}`...)
	}
	for i := range d.s.aggs {
		a := &d.s.aggs[i]
		b = append(b, ',')
		b = appendJSON(b, a.name)
		b = append(b, ':')
		b = appendJSON(b, a.value(&g.Aggs[i]))
	}
	if d.udaf != nil {
		b = append(b, `,"udaf":`...)
		v, err := d.udaf.Emit(context.Background(), g.UDAF)
		if err != nil || !json.Valid(v) {
			d.log.Warn("udaf emit failed; the value is null", "group", g.id(), "error", err)
			v = []byte("null")
		}
		b = append(b, v...)
	}
	return append(b, '}')
}

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case float64:
		if x == float64(int64(x)) && x < 1e15 && x > -1e15 {
			return strconv.AppendInt(b, int64(x), 10)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case json.RawMessage:
		return append(b, x...)
	}
	data, _ := json.Marshal(v)
	return append(b, data...)
}

// flush sends the pending outputs, one send per partition.
func (d *Sink) flush(ctx context.Context) error {
	if !d.unsent {
		return nil
	}
	byPart := map[uint32][]iggy.Message{}
	var order []uint32
	for _, o := range d.cp.Pending {
		hs := []header.Header{header.New(iggy.KeyHeader, header.StringValue(o.Key))}
		if o.Window != "" {
			hs = append(hs, header.New("window", header.StringValue(o.Window)))
		}
		if o.Deleted {
			hs = append(hs, header.New(iggy.DeletedHeader, header.BoolValue(true)))
		}
		if _, ok := byPart[o.Partition]; !ok {
			order = append(order, o.Partition)
		}
		byPart[o.Partition] = append(byPart[o.Partition], iggy.Message{ID: o.ID, Payload: o.Payload, Headers: hs})
	}
	sid, tid := iggy.NamedID(d.s.toStream), iggy.NamedID(d.s.toTopic)
	for _, p := range order {
		msgs := byPart[p]
		for len(msgs) > 0 {
			n := min(len(msgs), 1000)
			if _, err := d.client.SendMessages(ctx, sid, tid, iggy.ToPartition(p), msgs[:n]); err != nil {
				return connector.Unavailable(fmt.Errorf("derive: send %d updates to %s/%s partition %d: %w", n, d.s.toStream, d.s.toTopic, p, err))
			}
			msgs = msgs[n:]
		}
	}
	d.unsent = false
	return nil
}

// View answers GET /views/{name}/{key}: the current value of the key's
// group (without a window), or of its open windows, oldest first.
func (d *Sink) View(key string) (json.RawMessage, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s.window == 0 {
		g, ok := d.groups[key]
		if !ok || g.Deleted {
			return nil, false
		}
		return d.payload(g), true
	}
	var gs []*group
	for _, g := range d.groups {
		if g.Key == key && !g.Deleted && !d.closed(g) {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil, false
	}
	sort.Slice(gs, func(i, j int) bool { return less(gs[i], gs[j]) })
	b := []byte{'['}
	for i, g := range gs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d.payload(g)...)
	}
	return append(b, ']'), true
}
