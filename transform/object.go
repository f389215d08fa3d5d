package transform

import (
	"fmt"
	"sync"
	"time"

	"github.com/ferryhq/ferry/internal/jsonx"
)

// object is a JSON object payload scanned once for a run of JSON
// transforms: each member keeps the raw bytes of its name and value, so a
// transform that touches one member copies every other one verbatim (big
// numbers, unicode and formatting inside values survive untouched).
type object struct {
	src     []byte
	members []jsonx.Member // a member with a nil Value is deleted
	changed bool
	// replaced, when set, is the whole new payload (unwrap_envelope).
	replaced []byte
	// arena holds generated values; slices into it stay valid because
	// appending never rewrites bytes already handed out.
	arena []byte
	now   time.Time
}

var objects = sync.Pool{New: func() any { return &object{members: make([]jsonx.Member, 0, 32), arena: make([]byte, 0, 256)} }}

func getObject(payload []byte) (*object, error) { return getObjectOf(payload, false) }

// getObjectOf is getObject for a payload that, when checked, is known to
// be valid JSON: its values are not validated again.
func getObjectOf(payload []byte, checked bool) (*object, error) {
	o := objects.Get().(*object)
	o.src, o.changed, o.replaced, o.now = payload, false, nil, time.Time{}
	o.members, o.arena = o.members[:0], o.arena[:0]
	scan := jsonx.ScanObject
	if checked {
		scan = jsonx.ScanObjectChecked
	}
	var err error
	if o.members, err = scan(payload, o.members); err != nil {
		putObject(o)
		return nil, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	return o, nil
}

func putObject(o *object) {
	if cap(o.members) > 1024 || cap(o.arena) > 64<<10 {
		return
	}
	// Members still point into the last payload until the object is
	// reused; the pool lets go of idle objects at the next collections.
	o.src, o.replaced = nil, nil
	objects.Put(o)
}

// clock returns one time per message, so that every computed value of a
// message agrees.
func (o *object) clock() time.Time {
	if o.now.IsZero() {
		o.now = time.Now()
	}
	return o.now
}

// find returns the index of the first live member named key, or -1.
func (o *object) find(key string) int {
	for i := range o.members {
		if m := &o.members[i]; m.Value != nil && m.KeyIs(key) {
			return i
		}
	}
	return -1
}

func (o *object) has(key string) bool { return o.find(key) >= 0 }

// set gives every member named f.key the value v, or appends one.
func (o *object) set(f *fieldKey, v []byte) {
	found := false
	for i := range o.members {
		if m := &o.members[i]; m.Value != nil && m.KeyIs(f.name) {
			m.Value = v
			found = true
		}
	}
	if !found {
		o.members = append(o.members, jsonx.Member{Key: f.raw, Value: v, Escaped: f.escaped})
	}
	o.changed = true
}

// remove deletes member i.
func (o *object) remove(i int) {
	o.members[i].Value = nil
	o.changed = true
}

// value produces a configured value's JSON bytes.
func (o *object) value(v *compiledValue) []byte {
	if v.compute == nil {
		return v.static
	}
	start := len(o.arena)
	o.arena = v.compute(o.arena, o.clock())
	return o.arena[start:len(o.arena):len(o.arena)]
}

// result is the payload after the run: the original bytes when nothing
// changed, else a new buffer.
func (o *object) result() []byte { return o.resultIn(nil) }

// resultIn is result with a changed payload written into p's chunks
// (a new buffer when p is nil).
func (o *object) resultIn(p *payloadArena) []byte {
	if o.replaced != nil {
		return append(p.alloc(len(o.replaced)), o.replaced...)
	}
	if !o.changed {
		return o.src
	}
	n := 2
	for i := range o.members {
		if m := &o.members[i]; m.Value != nil {
			n += len(m.Key) + len(m.Value) + 4
		}
	}
	out := p.alloc(n)
	out = append(out, '{')
	first := true
	for i := range o.members {
		m := &o.members[i]
		if m.Value == nil {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, m.Key...)
		out = append(out, '"', ':')
		out = append(out, m.Value...)
	}
	return append(out, '}')
}

// payloadArena hands out room for a batch's new payloads from chunks, so a
// batch of changed messages costs a few allocations instead of one each.
// A chunk is never reused: the payloads in it live as long as their
// messages. The nil *payloadArena allocates each payload on its own.
type payloadArena struct{ chunk []byte }

// payloadChunk is the size of a chunk; a larger payload gets its own.
const payloadChunk = 64 << 10

// alloc returns an empty slice with room for n bytes: appending up to n
// bytes to it writes into the current chunk.
func (p *payloadArena) alloc(n int) []byte {
	if p == nil || n > payloadChunk/4 {
		return make([]byte, 0, n)
	}
	if cap(p.chunk)-len(p.chunk) < n {
		p.chunk = make([]byte, 0, payloadChunk)
	}
	start := len(p.chunk)
	p.chunk = p.chunk[:start+n]
	return p.chunk[start : start : start+n]
}

// fieldKey is a configured top-level key, ready to compare and to write.
type fieldKey struct {
	name    string
	raw     []byte // escaped, without quotes
	escaped bool   // raw differs from name or holds non-ASCII bytes
}

func newFieldKey(name string) fieldKey {
	q := jsonx.AppendString(nil, name)
	raw := q[1 : len(q)-1]
	escaped := string(raw) != name
	for i := 0; i < len(raw) && !escaped; i++ {
		escaped = raw[i] >= 0x80
	}
	return fieldKey{name: name, raw: raw, escaped: escaped}
}
