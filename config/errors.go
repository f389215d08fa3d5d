package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/errlist"

	"github.com/ferryhq/ferry/internal/didyoumean"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrNotFound: the connector or the version does not exist.
	ErrNotFound = errors.New("not found")
	// ErrActiveVersion: the version is the active one and cannot be deleted;
	// activate another version first.
	ErrActiveVersion = errors.New("version is active")
	// ErrInvalid: the configuration does not validate; the error also
	// carries an Errors list naming each problem.
	ErrInvalid = errors.New("invalid configuration")
)

// FieldError is one problem at one key of one configuration source.
type FieldError struct {
	// File is where the value came from: a file path, a URL, or "" when the
	// value came from an environment variable only.
	File string
	// Line is the 1-based line of the key in File, or 0 when unknown.
	Line int
	// Key is the dotted path of the key, with list indexes, e.g.
	// "streams[1].linger_time". Empty for whole-file problems.
	Key string
	// Var is the environment variable that set the value, if any.
	Var string
	// Msg says what is wrong and what was expected.
	Msg string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	}
	if e.Var != "" {
		b.WriteString("environment variable " + e.Var)
		if e.Key != "" {
			b.WriteString(" (" + e.Key + ")")
		}
		b.WriteString(": ")
	} else if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Errors is a list of configuration problems, in the order they were found.
// A loader returns all the problems of a source at once, not just the first.
type Errors []*FieldError

func (es Errors) Error() string { return errlist.Error(es) }

// Unwrap gives errors.Is and errors.As access to each FieldError.
func (es Errors) Unwrap() []error { return errlist.Unwrap(es) }

// Is makes a non-empty Errors match ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid && len(es) > 0 }

// err returns es as an error, or nil when empty.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// path is a key path inside a document: strings are keys, ints are list
// indexes.
type path []any

func (p path) key(k string) path { return append(p[:len(p):len(p)], k) }
func (p path) index(i int) path  { return append(p[:len(p):len(p)], i) }

// String renders the path as "a.b[2].c".
func (p path) String() string {
	var b strings.Builder
	for _, el := range p {
		switch v := el.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(v) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(quoteKey(v))
		}
	}
	return b.String()
}

// quoteKey quotes a TOML key when it is not a bare key.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(k)
		}
	}
	return k
}

// suggest returns the candidate closest to s, or "" when none is close.
func suggest(s string, candidates []string) string { return didyoumean.Closest(s, candidates) }
