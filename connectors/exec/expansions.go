package exec

import "strings"

// refuse returns an error when a placeholder occurs in text, the whole
// text of a construct in which Ferry does not substitute.
func (s *scanner) refuse(text string, at int, where string) error {
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		for _, p := range Placeholders {
			if strings.HasPrefix(text[i+1:], p.Name+"}") {
				return s.errorf(at+i, "placeholder {%s} is inside %s", p.Name, where)
			}
		}
	}
	return nil
}

// backquote scans `...`. Placeholders are refused inside: the text is
// parsed again with its own backslash rules, so quoting cannot be made
// reliable.
func (s *scanner) backquote() error {
	start := s.pos
	i := s.pos + 1
	for ; i < len(s.src) && s.src[i] != '`'; i++ {
		if s.src[i] == '\\' {
			i++
		}
	}
	if i >= len(s.src) {
		return s.errorf(start, "unterminated backquote")
	}
	if err := s.refuse(s.src[start:i], start, "backquotes `...`, where Ferry cannot quote it reliably; use $(...) instead"); err != nil {
		return err
	}
	s.copyN(i + 1 - start)
	return nil
}

// ansiC scans $'...' (ANSI-C quoting: backslash escapes).
func (s *scanner) ansiC() error {
	start := s.pos
	i := s.pos + 2
	for ; i < len(s.src) && s.src[i] != '\''; i++ {
		if s.src[i] == '\\' {
			i++
		}
	}
	if i >= len(s.src) {
		return s.errorf(start, "unterminated $'")
	}
	if err := s.refuse(s.src[start:i], start, "$'...' quoting; use '...' or \"...\" instead"); err != nil {
		return err
	}
	s.copyN(i + 1 - start)
	return nil
}

// param scans ${...}. Placeholders are refused inside: the word of an
// operator such as ${x:-word} has quoting rules of its own; refer to
// the FERRY_* variable instead.
func (s *scanner) param(q quoting) error {
	start := s.pos
	if s.onVar != nil {
		if n := nameLen(s.src[s.pos+2:]); n > 0 {
			s.onVar(s.src[s.pos+2:s.pos+2+n], q)
		}
	}
	i := paramEnd(s.src, s.pos, q)
	if i < 0 {
		return s.errorf(start, "unterminated ${")
	}
	if err := s.refuse(s.src[start+2:i+1], start+2, "a parameter expansion ${...}; use its variable instead, as in ${FERRY_PAYLOAD:-none}"); err != nil {
		return err
	}
	s.copyN(i + 1 - start)
	return nil
}

// paramEnd returns the index of the "}" that closes the ${ at src[at:],
// or -1: the first "}" that is not quoted, escaped or inside a nested
// expansion (the shells do not count other braces: ${x:-{a}b} is "{a"
// followed by "b}").
func paramEnd(src string, at int, q quoting) int {
	for i := at + 2; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case c == '"' || c == '\'' && q == inCode:
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return -1
			}
			i += j + 1
		case strings.HasPrefix(src[i:], "${"):
			if i = paramEnd(src, i, q); i < 0 {
				return -1
			}
		case strings.HasPrefix(src[i:], "$("):
			depth := 0
			for i += 2; i < len(src) && (src[i] != ')' || depth > 0); i++ {
				if src[i] == '(' {
					depth++
				} else if src[i] == ')' {
					depth--
				}
			}
			if i >= len(src) {
				return -1
			}
		case c == '}':
			return i
		}
	}
	return -1
}

// arith scans $((...)). Only numeric placeholders are allowed inside: the
// shell evaluates the text, and variables in it, as an expression.
func (s *scanner) arith() error {
	start := s.pos
	s.copyN(3)
	depth := 0
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; {
		case strings.HasPrefix(s.src[s.pos:], "${"):
			if err := s.param(inArith); err != nil {
				return err
			}
		case c == '$':
			s.copyN(1)
			if n := nameLen(s.src[s.pos:]); n > 0 && s.onVar != nil {
				s.onVar(s.src[s.pos:s.pos+n], inArith)
			}
		case c == '(':
			depth++
			s.copyN(1)
		case c == ')' && depth > 0:
			depth--
			s.copyN(1)
		case c == ')':
			if !strings.HasPrefix(s.src[s.pos:], "))") {
				return s.errorf(start, "unterminated $((")
			}
			s.copyN(2)
			return nil
		case c == '{':
			p, ok := s.placeholderAt()
			if !ok {
				s.copyN(1)
				continue
			}
			if !p.Numeric {
				return s.errorf(s.pos, "placeholder {%s} is inside an arithmetic expansion $((...)), where the shell evaluates its value as an expression; only {offset}, {partition} and {timestamp} are allowed there", p.Name)
			}
			s.substitute(p, inArith)
		default:
			s.copyN(1)
		}
	}
	return s.errorf(start, "unterminated $((")
}
