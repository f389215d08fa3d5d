package exec

import (
	"fmt"
	"strings"
)

// Placeholder is one {name} a command line may contain, and the
// environment variable that carries its value for each run.
type Placeholder struct {
	Name string // as written between braces: "payload"
	Env  string // the variable set for each run: "FERRY_PAYLOAD"
	// Numeric placeholders hold an unsigned decimal number that Ferry
	// formats; they are also allowed inside $((...)).
	Numeric bool
}

// Placeholders are the placeholders the exec sink knows, in the order
// the documentation lists them.
var Placeholders = []Placeholder{
	{"payload", "FERRY_PAYLOAD", false},
	{"offset", "FERRY_OFFSET", true},
	{"stream", "FERRY_STREAM", false},
	{"topic", "FERRY_TOPIC", false},
	{"partition", "FERRY_PARTITION", true},
	{"id", "FERRY_ID", false},
	{"timestamp", "FERRY_TIMESTAMP", true},
}

// quoting is how the shell reads the text where a placeholder sits.
type quoting int

const (
	inCode    quoting = iota // unquoted shell code
	inDouble                 // "..."
	inSingle                 // '...'
	inHeredoc                // body of a here-document with an unquoted delimiter
	inArith                  // $((...))
)

// reference is the text a placeholder becomes: a reference to its
// variable that gives exactly one field holding the value, whatever it
// contains, in that quoting.
func reference(p Placeholder, q quoting) string {
	switch q {
	case inCode:
		return `"$` + p.Env + `"`
	case inSingle:
		return `'"${` + p.Env + `}"'` // close '…', quote the reference, reopen
	}
	return "${" + p.Env + "}" // double quotes, here-document bodies, numbers in $((…))
}

// Rewrite turns a command line with placeholders into shell text that
// refers to the placeholders' variables instead (see the package
// documentation for the rules). The result does not depend on any
// message: values never enter the shell text. It also reports which
// placeholders the line uses, by name.
func Rewrite(command string) (string, map[string]bool, error) {
	return rewrite(command, reference)
}

func rewrite(command string, ref func(Placeholder, quoting) string) (string, map[string]bool, error) {
	if strings.IndexByte(command, 0) >= 0 {
		return "", nil, fmt.Errorf("command contains a NUL byte at byte %d", strings.IndexByte(command, 0))
	}
	s := &scanner{src: command, ref: ref, uses: map[string]bool{}}
	s.out.Grow(len(command) + 32)
	if err := s.code(false); err != nil {
		return "", nil, err
	}
	return s.out.String(), s.uses, nil
}

// scanner reads a command line as a POSIX shell does, far enough to know
// the quoting of every byte, and copies it to out with placeholders
// replaced.
type scanner struct {
	src     string
	pos     int
	out     strings.Builder
	ref     func(Placeholder, quoting) string
	uses    map[string]bool
	pending []heredoc // here-documents whose bodies start at the next newline
	// onVar, when set, is told of every $NAME and ${NAME...} expansion
	// and the quoting it sits in (for tests).
	onVar func(name string, q quoting)
}

func (s *scanner) errorf(at int, format string, args ...any) error {
	return fmt.Errorf("command: "+format+" (at byte %d)", append(args, at)...)
}

// placeholderAt returns the placeholder written at s.pos, if any.
func (s *scanner) placeholderAt() (Placeholder, bool) {
	if s.src[s.pos] != '{' {
		return Placeholder{}, false
	}
	for _, p := range Placeholders {
		if strings.HasPrefix(s.src[s.pos+1:], p.Name+"}") {
			return p, true
		}
	}
	return Placeholder{}, false
}

// substitute writes the reference for the placeholder at s.pos and
// moves past it.
func (s *scanner) substitute(p Placeholder, q quoting) {
	s.out.WriteString(s.ref(p, q))
	s.uses[p.Name] = true
	s.pos += len(p.Name) + 2
}

// copyN copies n bytes from the input.
func (s *scanner) copyN(n int) {
	n = min(n, len(s.src)-s.pos)
	s.out.WriteString(s.src[s.pos : s.pos+n])
	s.pos += n
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// isOperator reports the bytes that end a word in shell code.
func isOperator(c byte) bool { return strings.IndexByte(";&|()<>", c) >= 0 }

// code scans unquoted shell code: the whole line, or (nested) the body of
// $(...) up to its closing parenthesis, which it consumes.
func (s *scanner) code(nested bool) error {
	start, depth, wordStart := s.pos, 0, true
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\\':
			s.copyN(2)
			wordStart = false
		case c == '\'':
			if err := s.single(); err != nil {
				return err
			}
			wordStart = false
		case c == '"':
			if err := s.double(); err != nil {
				return err
			}
			wordStart = false
		case c == '`':
			if err := s.backquote(); err != nil {
				return err
			}
			wordStart = false
		case c == '$':
			if err := s.dollar(inCode); err != nil {
				return err
			}
			wordStart = false
		case c == '#' && wordStart:
			for s.pos < len(s.src) && s.src[s.pos] != '\n' {
				s.copyN(1) // a comment: left as written
			}
		case c == '\n':
			s.copyN(1)
			if err := s.heredocBodies(); err != nil {
				return err
			}
			wordStart = true
		case c == '<' && strings.HasPrefix(s.src[s.pos:], "<<<"):
			s.copyN(3) // a here-string: its word is ordinary code
			wordStart = true
		case c == '<' && strings.HasPrefix(s.src[s.pos:], "<<"):
			if err := s.heredocOperator(); err != nil {
				return err
			}
			wordStart = true
		case c == '(' && nested:
			depth++
			s.copyN(1)
			wordStart = true
		case c == ')' && nested:
			s.copyN(1)
			if depth == 0 {
				return nil
			}
			depth--
			wordStart = true
		case c == '{':
			if p, ok := s.placeholderAt(); ok {
				s.substitute(p, inCode)
				wordStart = false
				continue
			}
			s.copyN(1)
			wordStart = false // "{" alone opens a group: a blank follows, starting the next word
		default:
			s.copyN(1)
			wordStart = isBlank(c) || isOperator(c)
		}
	}
	if nested {
		return s.errorf(start-2, "unterminated $(")
	}
	return nil
}

// single scans '...': everything up to the next ' is literal.
func (s *scanner) single() error {
	start := s.pos
	s.copyN(1)
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; {
		case c == '\'':
			s.copyN(1)
			return nil
		case c == '{':
			if p, ok := s.placeholderAt(); ok {
				s.substitute(p, inSingle)
				continue
			}
			s.copyN(1)
		default:
			s.copyN(1)
		}
	}
	return s.errorf(start, "unterminated single quote")
}

// double scans "...".
func (s *scanner) double() error {
	start := s.pos
	s.copyN(1)
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; c {
		case '"':
			s.copyN(1)
			return nil
		case '\\':
			s.copyN(2) // an escaped byte, or a backslash kept with it: either way not special
		case '`':
			if err := s.backquote(); err != nil {
				return err
			}
		case '$':
			if err := s.dollar(inDouble); err != nil {
				return err
			}
		case '{':
			if p, ok := s.placeholderAt(); ok {
				s.substitute(p, inDouble)
				continue
			}
			s.copyN(1)
		default:
			s.copyN(1)
		}
	}
	return s.errorf(start, "unterminated double quote")
}

// dollar scans an expansion starting with $, in quoting q.
func (s *scanner) dollar(q quoting) error {
	rest := s.src[s.pos:]
	switch {
	case strings.HasPrefix(rest, "$(("):
		return s.arith()
	case strings.HasPrefix(rest, "$("):
		s.copyN(2)
		return s.code(true)
	case strings.HasPrefix(rest, "${"):
		return s.param(q)
	case strings.HasPrefix(rest, "$'") && q == inCode:
		return s.ansiC()
	}
	s.copyN(1)
	if s.onVar != nil {
		if n := nameLen(s.src[s.pos:]); n > 0 {
			s.onVar(s.src[s.pos:s.pos+n], q)
		}
	}
	return nil
}

// nameLen is the length of the shell variable name at the start of t.
func nameLen(t string) int {
	n := 0
	for n < len(t) {
		c := t[n]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || n > 0 && c >= '0' && c <= '9' {
			n++
			continue
		}
		break
	}
	return n
}
