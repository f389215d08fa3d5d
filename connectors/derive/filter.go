package derive

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// filter is a parsed predicate: comparisons of a JSON field with a
// literal, joined by and, or, not and parentheses. It is interpreted over
// a decoded payload; nothing of it is ever evaluated as code.
//
//	expr   = term { "or" term }
//	term   = factor { "and" factor }
//	factor = "not" factor | "(" expr ")" | FIELD OP LITERAL | FIELD
//	OP     = "=" | "==" | "!=" | "<" | "<=" | ">" | ">="
//	LITERAL = number | "string" | true | false | null
//
// A bare FIELD is true when the field is there and not null or false.
// Comparing a missing field is false, except != which is true. Numbers
// compare as numbers, strings as strings; < and > between other types
// are false.
type filter struct {
	op          string // "and", "or", "not", "cmp", "has"
	left, right *filter
	field       string
	cmp         string
	lit         any // float64, string, bool or nil
}

// maxFilterLen bounds a filter's text, and so its nesting.
const maxFilterLen = 4096

func parseFilter(text string) (*filter, error) {
	if len(text) > maxFilterLen {
		return nil, fmt.Errorf("longer than %d bytes", maxFilterLen)
	}
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	f, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %s at byte %d", p.toks[p.pos].text, p.toks[p.pos].at)
	}
	return f, nil
}

type token struct {
	kind string // "ident", "op", "num", "str", "(", ")"
	text string
	at   int
	str  string // a string literal's value
}

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			toks = append(toks, token{kind: string(c), text: string(c), at: i})
			i++
		case strings.ContainsRune("=!<>", rune(c)):
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			op := s[i:j]
			if op == "!" {
				return nil, fmt.Errorf("'!' at byte %d: use != or not", i)
			}
			toks = append(toks, token{kind: "op", text: op, at: i})
			i = j
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at byte %d", i)
			}
			v, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("string at byte %d: %v", i, err)
			}
			toks = append(toks, token{kind: "str", text: s[i : j+1], at: i, str: v})
			i = j + 1
		case c == '-' || c == '+' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && strings.ContainsRune("0123456789.eE+-", rune(s[j])) {
				j++
			}
			toks = append(toks, token{kind: "num", text: s[i:j], at: i})
			i = j
		case c == '_' || c < 0x80 && unicode.IsLetter(rune(c)):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] < 0x80 && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])))) {
				j++
			}
			toks = append(toks, token{kind: "ident", text: s[i:j], at: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at byte %d", c, i)
		}
	}
	return toks, nil
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek() *token {
	if p.pos < len(p.toks) {
		return &p.toks[p.pos]
	}
	return nil
}

func (p *parser) word(w string) bool {
	t := p.peek()
	if t != nil && t.kind == "ident" && strings.EqualFold(t.text, w) {
		p.pos++
		return true
	}
	return false
}

// maxDepth bounds nesting, so a deep input cannot exhaust the stack.
const maxDepth = 100

func (p *parser) expr(depth int) (*filter, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	l, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for p.word("or") {
		r, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		l = &filter{op: "or", left: l, right: r}
	}
	return l, nil
}

func (p *parser) term(depth int) (*filter, error) {
	l, err := p.factor(depth)
	if err != nil {
		return nil, err
	}
	for p.word("and") {
		r, err := p.factor(depth)
		if err != nil {
			return nil, err
		}
		l = &filter{op: "and", left: l, right: r}
	}
	return l, nil
}

func (p *parser) factor(depth int) (*filter, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	t := p.peek()
	switch {
	case t == nil:
		return nil, fmt.Errorf("unexpected end: want a field, not or (")
	case t.kind == "ident" && strings.EqualFold(t.text, "not"):
		p.pos++
		f, err := p.factor(depth + 1)
		if err != nil {
			return nil, err
		}
		return &filter{op: "not", left: f}, nil
	case t.kind == "(":
		p.pos++
		f, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c == nil || c.kind != ")" {
			return nil, fmt.Errorf("missing ) for the ( at byte %d", t.at)
		}
		p.pos++
		return f, nil
	case t.kind != "ident" || isKeyword(t.text):
		return nil, fmt.Errorf("unexpected %s at byte %d: want a field name", t.text, t.at)
	}
	p.pos++
	if err := checkPath(t.text); err != nil {
		return nil, fmt.Errorf("at byte %d: %v", t.at, err)
	}
	op := p.peek()
	if op == nil || op.kind != "op" {
		return &filter{op: "has", field: t.text}, nil
	}
	p.pos++
	lt := p.peek()
	if lt == nil {
		return nil, fmt.Errorf("missing a value after %s at byte %d", op.text, op.at)
	}
	p.pos++
	f := &filter{op: "cmp", field: t.text, cmp: op.text}
	if f.cmp == "==" {
		f.cmp = "="
	}
	switch {
	case lt.kind == "str":
		f.lit = lt.str
	case lt.kind == "num":
		n, err := strconv.ParseFloat(lt.text, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s at byte %d: %v", lt.text, lt.at, err)
		}
		f.lit = n
	case lt.kind == "ident" && lt.text == "true":
		f.lit = true
	case lt.kind == "ident" && lt.text == "false":
		f.lit = false
	case lt.kind == "ident" && lt.text == "null":
		f.lit = nil
	default:
		return nil, fmt.Errorf("unexpected %s at byte %d: want a number, a \"string\", true, false or null", lt.text, lt.at)
	}
	return f, nil
}

func isKeyword(w string) bool {
	switch strings.ToLower(w) {
	case "and", "or", "not", "true", "false", "null":
		return true
	}
	return false
}

// match evaluates the filter over a decoded JSON payload.
func (f *filter) match(doc any) bool {
	switch f.op {
	case "and":
		return f.left.match(doc) && f.right.match(doc)
	case "or":
		return f.left.match(doc) || f.right.match(doc)
	case "not":
		return !f.left.match(doc)
	case "has":
		v, ok := lookup(doc, f.field)
		return ok && v != nil && v != false
	}
	v, ok := lookup(doc, f.field)
	if !ok {
		return f.cmp == "!="
	}
	switch f.cmp {
	case "=":
		return equal(v, f.lit)
	case "!=":
		return !equal(v, f.lit)
	}
	c, ok := compare(v, f.lit)
	if !ok {
		return false
	}
	switch f.cmp {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default: // ">="
		return c >= 0
	}
}

func equal(v, lit any) bool {
	if c, ok := compare(v, lit); ok {
		return c == 0
	}
	return v == nil && lit == nil || v == lit
}

// compare orders two numbers or two strings.
func compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		if !ok {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	case string:
		y, ok := b.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(x, y), true
	}
	return 0, false
}

// lookup follows a dotted path through decoded JSON objects.
func lookup(doc any, path string) (any, bool) {
	v := doc
	for path != "" {
		name, rest, _ := strings.Cut(path, ".")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
		path = rest
	}
	return v, true
}
