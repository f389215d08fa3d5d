package derive

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ferryhq/ferry/connector"

	"github.com/stretchr/testify/require"
)

// The filter language: what matches and what is refused.
func TestFilter(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"status": "paid", "amount": 12.5, "user": map[string]any{"id": "u1", "vip": true}, "note": nil}
	for _, c := range []struct {
		expr string
		want bool
	}{
		{`status = "paid"`, true}, {`status == "paid"`, true}, {`status != "paid"`, false},
		{`amount > 10 and amount <= 12.5`, true}, {`amount < 10 or user.id = "u1"`, true},
		{`not (amount >= 12.5)`, false}, {`user.vip`, true}, {`note`, false}, {`missing`, false},
		{`missing != 1`, true}, {`missing = 1`, false}, {`note = null`, true}, {`user.vip = true`, true},
		{`status > 5`, false}, {`status >= "p"`, true}, {`amount = -1e3 OR status = "paid" AND amount < 0`, false},
	} {
		f, err := parseFilter(c.expr)
		require.NoError(t, err, c.expr)
		require.Equal(t, c.want, f.match(doc), c.expr)
	}
	for _, bad := range []string{``, `amount >`, `= 1`, `(a = 1`, `a = 1)`, `a ! 1`, `a = "x`, `a = b`, `and`, `a = 1 and`, `a;b`} {
		_, err := parseFilter(bad)
		require.Error(t, err, bad)
	}
}

// A filter from any text is parsed or refused, never a panic, and a
// parsed one evaluates on any JSON.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{`status = "paid" and amount > 10`, `not (a.b != null) or c`, `((((x))))`, `a = "\u00e9\"" or b <= -1.5e3`, `a =`} {
		f.Add(s, `{"a":{"b":1},"status":"paid","amount":11,"c":true}`)
	}
	f.Fuzz(func(t *testing.T, expr, payload string) {
		flt, err := parseFilter(expr)
		if err != nil {
			return
		}
		var doc any
		if json.Unmarshal([]byte(payload), &doc) == nil {
			flt.match(doc)
		}
	})
}

// A checkpoint from any bytes is decoded or refused with an error, never
// a panic; a decoded one encodes again.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte(`{"version":1,"next":{"in/events/0":12},"watermark":5000,"groups":[{"key":"a","start":0,"end":1000,"version":3,"aggs":[{"n":2,"sum":7}]}],` +
		`"pending":[{"id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partition":0,"key":"a@x","payload":{"key":"a"}}],"rejected":{"in/events/0":[{"offset":11,"reason":"late","late":true}]}}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2,"input":"changelog","seq":3,"groups":[{"key":"u","version":1,"aggs":[{"n":2},{"n":1},{"n":1,"sum":4},{"min":4,"max":4,"has":true},{},{},{},{},{}]}],` +
		`"rows":[{"topic":"s/t","kind":2,"key":"bzE=","group":"u","seq":1,"vals":[1,1,4,4,null,null,"\"a\"",{"user":"a"},null]},` +
		`{"topic":"s/t","kind":2,"key":"bzI=","group":"u","seq":3,"vals":[1,null,null,null,null,null,null,[1],null]}]}`))
	f.Add([]byte(`{"version":2,"input":"changelog","seq":1,"groups":[{"key":"u","aggs":[{},{},{},{},{},{},{},{},{}]}],"rows":[{"topic":"s/t","kind":2,"key":"bzE=","group":"u","seq":1,"vals":[1,1,"x",1,1,1,1,1,1]}]}`))
	f.Add([]byte(`{"version":2,"input":"changelog","seq":1,"groups":[{"key":"u","deleted":true}],"rows":[{"topic":"s/t","kind":2,"key":"bzE=","group":"u","seq":1,"vals":[]}]}`))
	f.Add([]byte(`{"version":1,"rows":[{"topic":"s/t","key":"bzE=","group":"u","seq":1}]}`))
	f.Add([]byte(`{"version":3}`))
	f.Add([]byte(`{"version":1,"groups":[null]}`))
	f.Add([]byte(`{"version":1,"groups":[{"key":"a"},{"key":"a"}]}`))
	f.Add([]byte(`{"vers`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		if _, err := json.Marshal(cp); err != nil {
			t.Fatalf("a decoded checkpoint does not encode: %v", err)
		}
		// Restored by a changelog sink: refused or consistent.
		d := fuzzSink(t, map[string]any{"input": "changelog", "group_by": "user"})
		d.cp = cp
		if d.restore() != nil {
			return
		}
		checkTable(t, d)
		for _, o := range d.emit() {
			if !json.Valid(o.Payload) {
				t.Fatalf("output %s is not JSON", o.Payload)
			}
		}
	})
}

// fuzzAggs are the aggregates of the fuzz tests: every function.
var fuzzAggs = []any{"count(*)", "count(user)", "sum(amount)", "min(amount)", "max(amount)", "avg(amount)", "distinct_count(user)", "latest(*)", "latest(status)"}

// fuzzSink is a derive sink that is not opened: no broker, state in memory.
func fuzzSink(t *testing.T, pc map[string]any) *Sink {
	vals := map[string]any{"to": "o/t", "state_dir": t.TempDir(), "aggregates": fuzzAggs}
	for k, v := range pc {
		vals[k] = v
	}
	c, err := New(connector.Config{Key: "f", Plugin: connector.PluginConfig{Values: vals}})
	if err != nil {
		t.Fatal(err)
	}
	d := c.(*Sink)
	d.cp, d.groups, d.partitions = &checkpoint{Version: checkpointVersion, Next: map[string]uint64{}}, map[string]*group{}, []uint32{0}
	if d.s.changelog {
		d.cp.Version, d.cp.Input, d.rows = checkpointVersionChangelog, "changelog", map[string]*row{}
	}
	return d
}

// checkTable checks the changelog state's invariants: every row is in
// its live group, every live group holds rows and only its own, and
// count(*) (the first aggregate) is its number of rows.
func checkTable(t *testing.T, d *Sink) {
	t.Helper()
	n := 0
	for id, g := range d.groups {
		if g.Deleted {
			if g.rows != nil || g.Aggs != nil {
				t.Fatalf("deleted group %q keeps rows or aggregates", id)
			}
			continue
		}
		if len(g.rows) == 0 {
			t.Fatalf("group %q is live with no row", id)
		}
		if got := g.Aggs[0].N; got != int64(len(g.rows)) {
			t.Fatalf("group %q: count %d, %d rows", id, got, len(g.rows))
		}
		for rid, r := range g.rows {
			if d.rows[rid] != r || r.Group != id {
				t.Fatalf("group %q holds row %q of group %q", id, r.Key, r.Group)
			}
		}
		n += len(g.rows)
	}
	if n != len(d.rows) {
		t.Fatalf("%d rows, %d in groups", len(d.rows), n)
	}
}

// Any payload and key header through every aggregate, a filter and
// hopping windows: applied or refused with an error, never a panic, and
// the outputs are valid JSON. The same messages as a changelog (the
// key's value, a second key's, an update of the first key to other, and
// with an odd off a deletion marker): the table's invariants hold after
// each, and its checkpoint, saved and restored, gives every group the
// same value.
func FuzzApply(f *testing.F) {
	f.Add(`{"ts":1000,"amount":3,"user":"u","status":"paid"}`, `{"user":"v","amount":-1}`, "k", int64(0))
	f.Add(`{"ts":"1970-01-01T00:00:05Z","amount":"2.5","user":{"id":1}}`, `{"user":{"id":1},"amount":2.5}`, "", int64(-5))
	f.Add(`{"ts":-99999999999,"amount":1e308}`, `{"amount":-1e308,"user":"u"}`, "k", int64(1))
	f.Add(`[1,2]`, `null`, "k", int64(2))
	f.Add(`null`, `{"status":"void","user":"u"}`, "", int64(3))
	f.Fuzz(func(t *testing.T, payload, other, key string, off int64) {
		d := fuzzSink(t, map[string]any{"window": "10s", "hop": "5s", "allowed_lateness": "1s", "event_time": "ts",
			"filter": `not (status = "void") or amount > 1`})
		for i := range 2 {
			m := msg(uint64(i), key, payload)
			m.Offset = uint64(off) + uint64(i)
			if _, err := d.apply(context.Background(), &m); err != nil {
				break
			}
		}
		for _, o := range d.emit() {
			if !json.Valid(o.Payload) {
				t.Fatalf("output %s is not JSON", o.Payload)
			}
		}

		groupBy := "key"
		if off%2 != 0 {
			groupBy = "user"
		}
		pc := map[string]any{"input": "changelog", "group_by": groupBy, "filter": `not (status = "void")`}
		d = fuzzSink(t, pc)
		msgs := []connector.Message{msg(0, key, payload), msg(1, key+"2", payload), msg(2, key, other)}
		if off%2 != 0 {
			msgs = append(msgs, deletion(3, key))
		}
		for i := range msgs {
			_ = d.applyRow(context.Background(), "s/t", &msgs[i])
			checkTable(t, d)
		}
		for _, o := range d.emit() {
			if !json.Valid(o.Payload) {
				t.Fatalf("output %s is not JSON", o.Payload)
			}
		}
		if err := d.cp.save(d.s.stateDir, d.groups, d.rows); err != nil {
			t.Fatal(err)
		}
		cp, err := loadCheckpoint(d.s.stateDir)
		if err != nil {
			t.Fatalf("a saved checkpoint does not load: %v", err)
		}
		d2 := fuzzSink(t, pc)
		d2.cp = cp
		if err := d2.restore(); err != nil {
			t.Fatalf("a saved checkpoint does not restore: %v", err)
		}
		checkTable(t, d2)
		for id, g := range d.groups {
			g2 := d2.groups[id]
			if g2 == nil || g2.Deleted != g.Deleted || g2.Version != g.Version {
				t.Fatalf("group %q is not restored", id)
			}
			if !g.Deleted {
				if a, b := d.payload(g), d2.payload(g2); string(a) != string(b) {
					t.Fatalf("group %q: %s, restored %s", id, a, b)
				}
			}
		}
	})
}
