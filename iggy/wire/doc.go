// Package wire is Apache Iggy's binary protocol 0.11, written once and shared
// by Ferry's client (package iggy) and embedded broker (package broker).
//
// It owns the 256-byte frame headers (request, reply, eviction), the
// operation and command codes and the mapping between them, the primitive
// encodings (identifiers, consumers, partitioning, polling strategies, the
// header/option TLV), every request and reply payload Ferry uses, the message
// batch format with its XXH3-64 checksums, the result section of
// metadata replies, and the table of Iggy error codes as typed Go errors.
//
// Encoders append to a caller's slice (AppendTo) so hot paths can reuse
// buffers; decoders never panic on any input, return errors that say which
// field was short or invalid, and alias the input rather than copy it where
// the doc says so. Every decoder has a fuzz target in this package.
//
// The layouts follow the fact sheet in the repository's shared notes, read
// from the upstream source; where this package departs from it, the doc
// comment on that symbol says so.
package wire
