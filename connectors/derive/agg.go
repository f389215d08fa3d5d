package derive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Aggregator is a user-defined aggregate over opaque states: package
// udaf's *Module (a WebAssembly module) implements it, and so can Go code
// (the tests' reference). Add takes one message's JSON payload; Emit
// returns the group's value as JSON. The derive sink calls Init for a new
// group, Add for each of its messages and Emit after a batch changed it;
// it keeps the states in its checkpoint. Merge is part of the ABI but
// not called yet (no two partial states of one group ever exist).
type Aggregator interface {
	Init(ctx context.Context) ([]byte, error)
	Add(ctx context.Context, state []byte, input []byte) ([]byte, error)
	Merge(ctx context.Context, a, b []byte) ([]byte, error)
	Emit(ctx context.Context, state []byte) ([]byte, error)
	Close(ctx context.Context) error
}

// aggSpec is one built-in aggregate of the configuration.
type aggSpec struct {
	text  string // as configured, "sum(amount)"
	fn    string // count, sum, min, max, avg, distinct_count, latest
	field string // "" for *
	name  string // the value's name in the output: "count", "sum_amount"
}

func parseAgg(s string) (aggSpec, error) {
	t := strings.TrimSpace(s)
	open := strings.IndexByte(t, '(')
	if open <= 0 || !strings.HasSuffix(t, ")") {
		return aggSpec{}, fmt.Errorf("%q: want FUNCTION(FIELD), such as sum(amount) or count(*)", s)
	}
	a := aggSpec{text: t, fn: strings.ToLower(strings.TrimSpace(t[:open])), field: strings.TrimSpace(t[open+1 : len(t)-1])}
	switch a.fn {
	case "count", "sum", "min", "max", "avg", "distinct_count", "latest":
	default:
		return aggSpec{}, fmt.Errorf("%q: unknown function %q (want count, sum, min, max, avg, distinct_count or latest)", s, a.fn)
	}
	if a.field == "*" {
		if a.fn != "count" && a.fn != "latest" {
			return aggSpec{}, fmt.Errorf("%q: only count and latest take *", s)
		}
		a.field, a.name = "", a.fn
		return a, nil
	}
	if err := checkPath(a.field); err != nil {
		return aggSpec{}, fmt.Errorf("%q: %v", s, err)
	}
	a.name = a.fn + "_" + strings.ReplaceAll(a.field, ".", "_")
	return a, nil
}

// aggState is one aggregate's state in a group; which fields are used
// depends on the function.
type aggState struct {
	N        int64           `json:"n,omitempty"`
	Sum      float64         `json:"sum,omitempty"`
	Min      float64         `json:"min,omitempty"`
	Max      float64         `json:"max,omitempty"`
	Has      bool            `json:"has,omitempty"`
	Distinct map[string]bool `json:"distinct,omitempty"`
	Latest   json.RawMessage `json:"latest,omitempty"`

	// With input = "changelog" (table.go), rebuilt from the rows at
	// Open: nums counts the group's rows per value of min and max,
	// values its rows per distinct value (distinct_count), latestSeq is
	// the sequence number of the row latest took its value from.
	nums      map[float64]int
	values    map[string]int
	latestSeq uint64
}

// fieldValue is the value an aggregate reads from a message: the decoded
// field (or the payload for *), and its raw JSON for latest and
// distinct_count.
func fieldValue(doc any, field string) (any, bool) {
	if field == "" {
		return doc, true
	}
	v, ok := lookup(doc, field)
	if !ok || v == nil {
		return nil, false // absent and null are skipped, as in SQL
	}
	return v, true
}

// number reads a JSON number, or a string holding one.
func number(v any, field string) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("field %s: want a number, got %s", field, shortJSON(v))
}

func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

// check returns the error add would return, without changing the state,
// so a message is applied to every aggregate or to none.
func (a *aggSpec) check(doc any) error {
	switch a.fn {
	case "sum", "min", "max", "avg":
		if v, ok := fieldValue(doc, a.field); ok {
			_, err := number(v, a.field)
			return err
		}
	}
	return nil
}

// add applies one message (checked first) to st.
func (a *aggSpec) add(st *aggState, doc any, raw []byte) {
	v, ok := fieldValue(doc, a.field)
	if !ok {
		return
	}
	switch a.fn {
	case "count":
		st.N++
	case "sum", "avg":
		f, _ := number(v, a.field)
		st.Sum += f
		st.N++
	case "min", "max":
		f, _ := number(v, a.field)
		if !st.Has || (a.fn == "min" && f < st.Min) || (a.fn == "max" && f > st.Max) {
			st.Min, st.Max = f, f
		}
		st.Has = true
	case "distinct_count":
		if st.Distinct == nil {
			st.Distinct = map[string]bool{}
		}
		b, _ := json.Marshal(v)
		st.Distinct[string(b)] = true
	case "latest":
		if a.field == "" {
			st.Latest = append(json.RawMessage(nil), raw...)
		} else {
			st.Latest, _ = json.Marshal(v)
		}
	}
}

// value is the aggregate's output value.
func (a *aggSpec) value(st *aggState) any {
	switch a.fn {
	case "count":
		return st.N
	case "sum":
		return st.Sum
	case "avg":
		if st.N == 0 {
			return nil
		}
		return st.Sum / float64(st.N)
	case "min":
		if !st.Has {
			return nil
		}
		return st.Min
	case "max":
		if !st.Has {
			return nil
		}
		return st.Max
	case "distinct_count":
		if st.values != nil {
			return len(st.values)
		}
		return len(st.Distinct)
	default: // latest
		if st.Latest == nil {
			return nil
		}
		return st.Latest
	}
}

// rowValue is what the aggregate keeps of one changelog row (checked
// first): 1 for count, the number for sum, avg, min and max, the
// value's JSON for distinct_count and latest (the compacted payload for
// latest(*)); nil when the row gives it nothing (the field is absent or
// null, or the payload is null for latest(*)).
func (a *aggSpec) rowValue(doc any, raw []byte) json.RawMessage {
	v, ok := fieldValue(doc, a.field)
	if !ok {
		return nil
	}
	var out []byte
	switch a.fn {
	case "count":
		out = []byte("1")
	case "sum", "avg", "min", "max":
		f, _ := number(v, a.field)
		out = strconv.AppendFloat(nil, f, 'g', -1, 64)
	case "latest":
		if a.field == "" {
			var buf bytes.Buffer
			if json.Compact(&buf, raw) != nil {
				return nil // raw was decoded into doc, so it is JSON
			}
			out = buf.Bytes()
			break
		}
		out, _ = json.Marshal(v)
	default: // distinct_count
		out, _ = json.Marshal(v)
	}
	if string(out) == "null" {
		return nil
	}
	return out
}

// rowNumber reads a number rowValue kept.
func rowNumber(v json.RawMessage) (float64, error) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("value %.40q is not a number", v)
	}
	return f, nil
}

// addRow adds a changelog row's value v (not nil; seq the row's
// sequence number, above every other row's of the group) to st.
func (a *aggSpec) addRow(st *aggState, v json.RawMessage, seq uint64) error {
	switch a.fn {
	case "count":
		st.N++
	case "sum", "avg":
		f, err := rowNumber(v)
		if err != nil {
			return err
		}
		st.Sum += f
		st.N++
	case "min", "max":
		f, err := rowNumber(v)
		if err != nil {
			return err
		}
		if st.nums == nil {
			st.nums = map[float64]int{}
		}
		st.nums[f]++
		if !st.Has || (a.fn == "min" && f < st.Min) || (a.fn == "max" && f > st.Max) {
			st.Min, st.Max = f, f
		}
		st.Has = true
	case "distinct_count":
		if st.values == nil {
			st.values = map[string]int{}
		}
		st.values[string(v)]++
	case "latest":
		if seq >= st.latestSeq {
			st.Latest, st.latestSeq = v, seq
		}
	}
	return nil
}

// retractRow takes a changelog row's value v (not nil; seq the row's
// sequence number) out of st, the state of aggregate i in a group whose
// remaining rows are rest (the row left already).
func (a *aggSpec) retractRow(st *aggState, i int, v json.RawMessage, seq uint64, rest map[string]*row) error {
	switch a.fn {
	case "count":
		st.N--
	case "sum", "avg":
		f, err := rowNumber(v)
		if err != nil {
			return err
		}
		st.Sum -= f
		st.N--
		if st.N == 0 {
			st.Sum = 0 // no rounding left over from adding and taking back
		}
	case "min", "max":
		f, err := rowNumber(v)
		if err != nil {
			return err
		}
		if st.nums[f] <= 1 {
			delete(st.nums, f)
		} else {
			st.nums[f]--
		}
		if _, still := st.nums[f]; !still && st.Has && f == st.Min {
			// The extreme left the group: the next one is found among
			// the distinct values left.
			st.Has = false
			for x := range st.nums {
				if !st.Has || (a.fn == "min" && x < st.Min) || (a.fn == "max" && x > st.Max) {
					st.Min, st.Max = x, x
				}
				st.Has = true
			}
		}
	case "distinct_count":
		if st.values[string(v)] <= 1 {
			delete(st.values, string(v))
		} else {
			st.values[string(v)]--
		}
	case "latest":
		if seq == st.latestSeq {
			// The latest row left: the value is the one of the row
			// updated last among the rest.
			st.Latest, st.latestSeq = nil, 0
			for _, r := range rest {
				if r.Vals[i] != nil && r.Seq > st.latestSeq {
					st.Latest, st.latestSeq = r.Vals[i], r.Seq
				}
			}
		}
	}
	return nil
}
