// Package pgjson turns PostgreSQL values, in PostgreSQL's text output
// format, into JSON, by type OID. It is shared by the postgres source's
// polling mode (queries read in text format) and its CDC mode (pgoutput
// sends text), so a row reads the same either way.
//
// The mapping is faithful: integers and numerics become JSON numbers with
// every digit PostgreSQL printed (no float64 round trip), floats become
// numbers (NaN and ±Infinity become strings), timestamptz becomes RFC 3339
// in UTC, timestamp without time zone becomes RFC 3339 without an offset
// (it names no instant), bytea becomes standard base64, json and jsonb are
// embedded as they are, arrays become (nested) JSON arrays of mapped
// elements, and every other type becomes a JSON string of its text form.
// A value whose text does not have the expected shape (a BC date, a year
// past 9999) falls back to that string, never to an error.
//
// The sessions must use DateStyle=ISO, IntervalStyle=iso_8601 and
// bytea_output=hex (RuntimeParams sets them).
package pgjson
