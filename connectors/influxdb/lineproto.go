package influxdb

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line protocol, written by hand (see the package doc). The rules are
// InfluxDB 1.8's parser's (models/points.go), which 2.x keeps:
//
//   - a measurement escapes ',' and ' '; tag keys, tag values and field
//     keys escape ',', '=' and ' ', each with a backslash, and the server
//     unescapes exactly those pairs;
//   - a backslash before any other byte is a literal backslash, but the
//     server's scanner decides that a separator is escaped by looking at
//     the byte before it, and its line scanner skips any backslash pair:
//     a name that ends in a backslash, or holds one right before ',', '=',
//     ' ' or another backslash, cannot be written so that it reads back
//     the same, and is refused (errUnwritable);
//   - a name cannot hold a newline (a line ends there) nor be empty, and
//     must be UTF-8;
//   - a string field value is quoted, escaping '"' and '\' with a
//     backslash; it may hold newlines.

// errUnwritable is a name line protocol cannot carry unchanged.
var errUnwritable = errors.New("line protocol cannot carry it")

// nameKind says which characters a name escapes.
type nameKind int

const (
	measurementName nameKind = iota // ',' and ' '
	keyName                         // tag keys, tag values, field keys: ',', '=' and ' '
)

// checkName says why s cannot be written as a name, or nil.
func checkName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty: %w", errUnwritable)
	case !utf8.ValidString(s):
		return fmt.Errorf("%q is not UTF-8: %w", s, errUnwritable)
	case strings.ContainsAny(s, "\n\r"):
		return fmt.Errorf("%q holds a line break: %w", s, errUnwritable)
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if i == len(s)-1 {
			return fmt.Errorf("%q ends in a backslash: %w", s, errUnwritable)
		}
		switch s[i+1] {
		case ',', '=', ' ', '\\':
			return fmt.Errorf("%q holds a backslash before %q: %w", s, s[i+1], errUnwritable)
		}
	}
	return nil
}

// appendName appends s escaped as a name of kind k; s must pass
// checkName.
func appendName(buf []byte, s string, k nameKind) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ',' || c == ' ' || (c == '=' && k == keyName) {
			buf = append(buf, '\\')
		}
		buf = append(buf, c)
	}
	return buf
}

// appendString appends s as a quoted string field value.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, s[i])
	}
	return append(buf, '"')
}
