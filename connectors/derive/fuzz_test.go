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
	f.Add([]byte(`{"version":2}`))
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
	})
}

// Any payload and key header through every aggregate, a filter and
// hopping windows: applied or refused with an error, never a panic, and
// the outputs are valid JSON.
func FuzzApply(f *testing.F) {
	f.Add(`{"ts":1000,"amount":3,"user":"u","status":"paid"}`, "k", int64(0))
	f.Add(`{"ts":"1970-01-01T00:00:05Z","amount":"2.5","user":{"id":1}}`, "", int64(-5))
	f.Add(`{"ts":-99999999999,"amount":1e308}`, "k", int64(1))
	f.Add(`[1,2]`, "k", int64(2))
	f.Add(`null`, "", int64(3))
	f.Fuzz(func(t *testing.T, payload, key string, off int64) {
		c, err := New(connector.Config{Key: "f", Plugin: connector.PluginConfig{Values: map[string]any{
			"to": "o/t", "state_dir": t.TempDir(), "window": "10s", "hop": "5s", "allowed_lateness": "1s", "event_time": "ts",
			"filter":     `not (status = "void") or amount > 1`,
			"aggregates": []any{"count(*)", "count(user)", "sum(amount)", "min(amount)", "max(amount)", "avg(amount)", "distinct_count(user)", "latest(*)", "latest(status)"},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		d := c.(*Sink)
		d.cp, d.groups, d.partitions = &checkpoint{Version: checkpointVersion, Next: map[string]uint64{}}, map[string]*group{}, []uint32{0}
		for i := range 2 {
			m := msg(uint64(i), key, payload)
			m.Offset = uint64(off) + uint64(i)
			if _, err := d.apply(context.Background(), &m); err != nil {
				return
			}
		}
		for _, o := range d.emit() {
			if !json.Valid(o.Payload) {
				t.Fatalf("output %s is not JSON", o.Payload)
			}
		}
	})
}
