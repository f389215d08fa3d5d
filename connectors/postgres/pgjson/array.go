package pgjson

// maxArrayDepth bounds nesting; PostgreSQL allows 6 dimensions.
const maxArrayDepth = 16

// appendArray appends the JSON array for an array's text form, such as
// `{1,2}`, `{{"a b",NULL},{c,d}}` or `[0:1]={1,2}` (the bounds are
// dropped). ok is false when text is not a well-formed array.
func (t *Types) appendArray(dst []byte, at arrayType, text []byte) ([]byte, bool) {
	if len(text) > 0 && text[0] == '[' { // explicit bounds: "[1:2][3:4]={...}"
		i := 0
		for i < len(text) && text[i] != '=' {
			i++
		}
		if i == len(text) {
			return dst, false
		}
		text = text[i+1:]
	}
	p := arrayParser{t: t, at: at, s: text}
	out, ok := p.array(dst, 0)
	if !ok || p.skipSpace() < len(p.s) {
		return dst, false
	}
	return out, true
}

type arrayParser struct {
	t   *Types
	at  arrayType
	s   []byte
	i   int
	buf []byte // an element's unescaped text
}

func (p *arrayParser) skipSpace() int {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
	return p.i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// array parses "{...}" at p.i.
func (p *arrayParser) array(dst []byte, depth int) ([]byte, bool) {
	if depth > maxArrayDepth || p.skipSpace() >= len(p.s) || p.s[p.i] != '{' {
		return dst, false
	}
	p.i++
	dst = append(dst, '[')
	if p.skipSpace() < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(dst, ']'), true
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		if p.skipSpace() >= len(p.s) {
			return dst, false
		}
		var ok bool
		if p.s[p.i] == '{' {
			dst, ok = p.array(dst, depth+1)
		} else {
			dst, ok = p.element(dst)
		}
		if !ok || p.skipSpace() >= len(p.s) {
			return dst, false
		}
		switch p.s[p.i] {
		case p.at.delim:
			p.i++
		case '}':
			p.i++
			return append(dst, ']'), true
		default:
			return dst, false
		}
	}
}

// element parses one quoted or unquoted element and appends its JSON.
func (p *arrayParser) element(dst []byte) ([]byte, bool) {
	p.buf = p.buf[:0]
	if p.s[p.i] == '"' {
		p.i++
		for {
			if p.i >= len(p.s) {
				return dst, false
			}
			c := p.s[p.i]
			p.i++
			if c == '"' {
				break
			}
			if c == '\\' {
				if p.i >= len(p.s) {
					return dst, false
				}
				c = p.s[p.i]
				p.i++
			}
			p.buf = append(p.buf, c)
		}
		return p.t.appendScalar(dst, p.at.elem, p.buf), true
	}
	quotedAny := false
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == p.at.delim || c == '}' || c == '{' || c == '"' {
			break
		}
		p.i++
		if c == '\\' {
			if p.i >= len(p.s) {
				return dst, false
			}
			c = p.s[p.i]
			p.i++
			quotedAny = true
		}
		p.buf = append(p.buf, c)
	}
	for len(p.buf) > 0 && isSpace(p.buf[len(p.buf)-1]) {
		p.buf = p.buf[:len(p.buf)-1]
	}
	if len(p.buf) == 0 {
		return dst, false
	}
	if !quotedAny && len(p.buf) == 4 && (p.buf[0]|0x20) == 'n' && (p.buf[1]|0x20) == 'u' &&
		(p.buf[2]|0x20) == 'l' && (p.buf[3]|0x20) == 'l' {
		return append(dst, "null"...), true
	}
	return p.t.appendScalar(dst, p.at.elem, p.buf), true
}
