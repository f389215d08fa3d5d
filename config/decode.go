package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/internal/units"
)

// Struct tags used by the binder:
//
//	toml:"name"          the key; "-" skips the field
//	cfg:"required"       the key must be present
//	cfg:"secret"         the value is never echoed in errors or logs
//	cfg:"noenv"          no IGGY_CONNECTORS_* variable addresses the field

// binder decodes parsed tables into typed structs, collecting every problem
// with the file, the line when known, and the dotted key.
type binder struct {
	file    string
	src     []byte // TOML source, for line numbers; nil for JSON
	errs    Errors
	present map[string]bool
}

func newBinder(file string, src []byte) *binder {
	return &binder{file: file, src: src, present: map[string]bool{}}
}

func (b *binder) fail(p path, format string, args ...any) {
	e := &FieldError{File: b.file, Key: p.String(), Msg: fmt.Sprintf(format, args...)}
	if b.src != nil {
		e.Line = locate(b.src, p)
	}
	b.errs = append(b.errs, e)
}

// has reports whether the document set the key at p.
func (b *binder) has(p path) bool { return b.present[p.String()] }

// defaulter is implemented by list elements that need defaults before their
// table is decoded into them.
type defaulter interface{ setDefaults() }

// hinter gives extra advice for unknown keys of a struct, keyed by the
// unknown key.
type hinter interface{ keyHints() map[string]string }

// customBinder decodes its own value.
type customBinder interface {
	bindFrom(b *binder, p path, v any)
}

type fieldInfo struct {
	name     string
	index    []int
	required bool
	secret   bool
	noenv    bool
	typ      reflect.Type
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

// fieldsOf lists the keyed fields of a struct type, flattening embedded
// structs.
func fieldsOf(t reflect.Type) []fieldInfo {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]fieldInfo)
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			for _, f := range fieldsOf(sf.Type) {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		name := sf.Tag.Get("toml")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		f := fieldInfo{name: name, index: []int{i}, typ: sf.Type}
		for _, opt := range strings.Split(sf.Tag.Get("cfg"), ",") {
			switch opt {
			case "required":
				f.required = true
			case "secret":
				f.secret = true
			case "noenv":
				f.noenv = true
			}
		}
		out = append(out, f)
	}
	fieldCache.Store(t, out)
	return out
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	enumType     = reflect.TypeOf((*enum)(nil)).Elem()
	anyMapType   = reflect.TypeOf(map[string]any(nil))
)

// bindStruct decodes t into the struct rv (addressable).
func (b *binder) bindStruct(p path, t *table, rv reflect.Value) {
	fields := fieldsOf(rv.Type())
	byName := make(map[string]fieldInfo, len(fields))
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		byName[f.name] = f
		names = append(names, f.name)
	}
	var hints map[string]string
	if h, ok := rv.Addr().Interface().(hinter); ok {
		hints = h.keyHints()
	}
	for _, k := range t.keys {
		f, ok := byName[k]
		if !ok {
			b.unknownKey(p.key(k), names, hints)
			continue
		}
		b.bindValue(p.key(k), t.vals[k], rv.FieldByIndex(f.index), f)
	}
	for _, f := range fields {
		if _, ok := t.vals[f.name]; f.required && !ok {
			b.fail(p.key(f.name), "required key is missing; expected %s", expectation(f.typ))
		}
	}
}

func (b *binder) unknownKey(p path, allowed []string, hints map[string]string) {
	k := p[len(p)-1].(string)
	msg := "unknown key"
	if h, ok := hints[k]; ok {
		msg += "; " + h
	} else if s := suggest(k, allowed); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else {
		sorted := append([]string(nil), allowed...)
		sort.Strings(sorted)
		msg += "; allowed keys here: " + strings.Join(sorted, ", ")
	}
	b.fail(p, "%s", msg)
}

// expectation describes what a field of type t accepts.
func expectation(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration such as "5ms", "1s" or "1h 30m"`
	case t.Implements(enumType):
		e := reflect.Zero(t).Interface().(enum)
		return "one of " + strings.Join(quoted(e.enumValues()), ", ")
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of tables"
		}
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(expectation(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return t.String()
}

// bindValue decodes v into dst, the field f at p.
func (b *binder) bindValue(p path, v any, dst reflect.Value, f fieldInfo) {
	b.present[p.String()] = true
	if cb, ok := dst.Addr().Interface().(customBinder); ok {
		cb.bindFrom(b, p, v)
		return
	}
	got := func() string {
		if f.secret {
			return typeName(v)
		}
		return describe(v)
	}
	t := dst.Type()
	switch {
	case t == durationType:
		s, ok := v.(string)
		if !ok {
			b.fail(p, "expected %s, got %s", expectation(t), got())
			return
		}
		d, err := units.ParseDuration(s)
		if err != nil {
			b.fail(p, "expected %s, got %q", expectation(t), s)
			return
		}
		dst.SetInt(int64(d))
		return
	case t.Implements(enumType):
		s, ok := v.(string)
		if !ok {
			b.fail(p, "expected %s, got %s", expectation(t), got())
			return
		}
		c, err := canonical(dst.Interface().(enum), s)
		if err != nil {
			b.fail(p, "%v", err)
			return
		}
		dst.SetString(c)
		return
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			b.fail(p, "expected a string, got %s", got())
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		bv, ok := v.(bool)
		if !ok {
			if s, isStr := v.(string); isStr && (strings.EqualFold(s, "true") || strings.EqualFold(s, "false")) {
				b.fail(p, "expected true or false, got the string %q; write it without quotes", s)
				return
			}
			b.fail(p, "expected true or false, got %s", got())
			return
		}
		dst.SetBool(bv)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			b.fail(p, "expected an integer, got %s", got())
			return
		}
		if dst.OverflowInt(n) {
			b.fail(p, "%d is out of range for this key", n)
			return
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			b.fail(p, "expected a non-negative integer, got %s", got())
			return
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			b.fail(p, "%d is out of range; expected an integer from 0 to %d", n, maxUint(dst))
			return
		}
		dst.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case int64:
			dst.SetFloat(float64(x))
		case float64:
			dst.SetFloat(x)
		default:
			b.fail(p, "expected a number, got %s", got())
		}
	case reflect.Slice:
		b.bindSlice(p, v, dst, f)
	case reflect.Map:
		b.bindMap(p, v, dst, f)
	case reflect.Struct:
		t, ok := v.(*table)
		if !ok {
			b.fail(p, "expected a table, got %s", got())
			return
		}
		b.bindStruct(p, t, dst)
	default:
		b.fail(p, "cannot decode into %s", t)
	}
}

func maxUint(v reflect.Value) uint64 {
	switch v.Kind() {
	case reflect.Uint8:
		return math.MaxUint8
	case reflect.Uint16:
		return math.MaxUint16
	case reflect.Uint32:
		return math.MaxUint32
	}
	return math.MaxInt64 // TOML integers are signed 64-bit
}

func (b *binder) bindSlice(p path, v any, dst reflect.Value, f fieldInfo) {
	et := dst.Type().Elem()
	arr, ok := v.([]any)
	if !ok {
		if _, isTable := v.(*table); isTable && et.Kind() == reflect.Struct {
			b.fail(p, "expected an array of tables, got a single table; write [[%s]] instead of [%s]", p.String(), p.String())
			return
		}
		if s, isStr := v.(string); isStr && et.Kind() == reflect.String && !f.secret {
			b.fail(p, "expected an array of strings, got the string %q; write [%q]", s, s)
			return
		}
		b.fail(p, "expected %s, got %s", expectation(dst.Type()), typeName(v))
		return
	}
	out := reflect.MakeSlice(dst.Type(), 0, len(arr))
	for i, ev := range arr {
		elem := reflect.New(et)
		if d, ok := elem.Interface().(defaulter); ok {
			d.setDefaults()
		}
		ep := p.index(i)
		if et.Kind() == reflect.Struct {
			t, ok := ev.(*table)
			if !ok {
				b.fail(ep, "expected a table, got %s", typeName(ev))
				continue
			}
			b.bindStruct(ep, t, elem.Elem())
		} else {
			b.bindValue(ep, ev, elem.Elem(), fieldInfo{typ: et, secret: f.secret})
		}
		out = reflect.Append(out, elem.Elem())
	}
	dst.Set(out)
}

func (b *binder) bindMap(p path, v any, dst reflect.Value, f fieldInfo) {
	t, ok := v.(*table)
	if !ok {
		b.fail(p, "expected a table, got %s", typeName(v))
		return
	}
	if dst.Type() == anyMapType {
		dst.Set(reflect.ValueOf(t.plain()))
		return
	}
	if dst.Type().Key().Kind() != reflect.String || dst.Type().Elem().Kind() != reflect.String {
		b.fail(p, "cannot decode into %s", dst.Type())
		return
	}
	m := reflect.MakeMapWithSize(dst.Type(), len(t.keys))
	for _, k := range t.keys {
		s, ok := t.vals[k].(string)
		if !ok {
			if f.secret {
				b.fail(p.key(k), "expected a string, got %s", typeName(t.vals[k]))
			} else {
				b.fail(p.key(k), "expected a string, got %s", describe(t.vals[k]))
			}
			continue
		}
		b.present[p.key(k).String()] = true
		m.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(s).Convert(dst.Type().Elem()))
	}
	dst.Set(m)
}
