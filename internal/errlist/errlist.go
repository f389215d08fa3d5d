// Package errlist renders a list of configuration errors the one way
// Ferry shows them: a single error as itself, several as "N
// configuration errors:" with one indented line each, in the order found.
// Both the runtime's own keys (package config) and connectors' settings
// (package connector) report through it, so a user sees one format.
package errlist

import (
	"fmt"
	"strings"
)

// Error renders es.
func Error[E error](es []E) string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d configuration errors:", len(es))
	for _, e := range es {
		b.WriteString("\n  " + e.Error())
	}
	return b.String()
}

// Unwrap gives errors.Is and errors.As access to each error of es.
func Unwrap[E error](es []E) []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
