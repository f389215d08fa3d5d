// Package jsonx is Ferry's small JSON toolkit for code that must not
// decode whole documents: a validating scanner that finds value spans
// without allocating (used by the transforms to touch one member of an
// object and copy the rest verbatim), a value tree that keeps number
// literals as text (so integers beyond float64 precision survive), and
// string quoting and unquoting.
package jsonx
