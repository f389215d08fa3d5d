package exec

import "strings"

// heredoc is a here-document operator seen on the current line.
type heredoc struct {
	delim     string
	quoted    bool // any quoting in the delimiter: the body is literal
	stripTabs bool // <<-
}

// heredocOperator scans << or <<- and the delimiter word after it.
func (s *scanner) heredocOperator() error {
	start := s.pos
	s.copyN(2)
	var h heredoc
	if s.pos < len(s.src) && s.src[s.pos] == '-' {
		h.stripTabs = true
		s.copyN(1)
	}
	for s.pos < len(s.src) && isBlank(s.src[s.pos]) {
		s.copyN(1)
	}
	var delim strings.Builder
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		if isBlank(c) || c == '\n' || isOperator(c) {
			break
		}
		switch c {
		case '\\':
			h.quoted = true
			if s.pos+1 < len(s.src) {
				delim.WriteByte(s.src[s.pos+1])
			}
			s.copyN(2)
		case '\'', '"':
			h.quoted = true
			end := strings.IndexByte(s.src[s.pos+1:], c)
			if end < 0 {
				return s.errorf(s.pos, "unterminated quote in a here-document delimiter")
			}
			delim.WriteString(s.src[s.pos+1 : s.pos+1+end])
			s.copyN(end + 2)
		default:
			delim.WriteByte(c)
			s.copyN(1)
		}
	}
	if delim.Len() == 0 && !h.quoted {
		return s.errorf(start, "here-document operator without a delimiter")
	}
	h.delim = delim.String()
	s.pending = append(s.pending, h)
	return nil
}

// heredocBodies scans the bodies of the pending here-documents, which
// start after the newline just copied.
func (s *scanner) heredocBodies() error {
	hs := s.pending
	s.pending = nil
	for _, h := range hs {
		bodyStart, bodyEnd := s.pos, len(s.src)
		end := len(s.src) // after the delimiter line
		for i := s.pos; i < len(s.src); {
			j := strings.IndexByte(s.src[i:], '\n')
			lineEnd, next := len(s.src), len(s.src)
			if j >= 0 {
				lineEnd, next = i+j, i+j+1
			}
			line := s.src[i:lineEnd]
			if h.stripTabs {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				bodyEnd, end = i, next
				break
			}
			i = next
		}
		body := s.src[bodyStart:bodyEnd]
		if h.quoted {
			if err := s.refuse(body, bodyStart, "a here-document with a quoted delimiter, where it would stay literal text; unquote the delimiter"); err != nil {
				return err
			}
			s.copyN(end - bodyStart)
			continue
		}
		if err := s.heredocText(bodyEnd); err != nil {
			return err
		}
		s.copyN(end - s.pos)
	}
	return nil
}

// heredocText scans an expanding here-document body up to end.
func (s *scanner) heredocText(end int) error {
	full := s.src
	s.src = full[:end] // nested scans stop at the body's end
	defer func() { s.src = full }()
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; c {
		case '\\':
			s.copyN(2)
		case '`':
			if err := s.backquote(); err != nil {
				return err
			}
		case '$':
			if err := s.dollar(inHeredoc); err != nil {
				return err
			}
		case '{':
			if p, ok := s.placeholderAt(); ok {
				s.substitute(p, inHeredoc)
				continue
			}
			s.copyN(1)
		default:
			s.copyN(1)
		}
	}
	return nil
}
