// Package transform holds the transforms a connector applies to messages in
// flight, configured as upstream's `[transforms.<name>]` tables and applied
// in file order: between the source and the stream's encoding in a source,
// between the stream's decoding and Consume in a sink.
//
// The transforms are upstream's, with its TOML shapes: add_fields,
// delete_fields, filter_fields, update_fields, unwrap_envelope, and the
// format conversions avro_convert, proto_convert and flat_buffer_convert
// (alias flatbuffer_convert), which use package codec; and Ferry's wasm,
// a WebAssembly module (package transform/wasm, docs/wasm.md).
//
// Most transforms change one message (Transform.Apply). A BatchTransform
// (wasm) takes the whole batch in one call and returns an Outcome per
// message: keep, drop, replace, split, or fail. Chain.ApplyBatch, which
// the runtime calls, runs the per-message transforms on each message and
// each batch transform once on what the transforms before it kept; a
// chain without batch transforms does what Apply does.
//
// Apply takes a message and its payload's schema and returns the schema
// after the change (the *_convert transforms change it), whether to keep
// the message (false drops it; the runtime counts it in messages_filtered)
// or an error (the message goes to the dead-letter path). Configuration
// errors — a bad regex, an unknown computed value or condition, a missing
// key, a schema file that does not compile, a conversion that does not
// exist — are reported by Build, naming the connector file and the
// transform key.
//
// JSON transforms never decode the whole document: a chain scans an
// object payload once (package jsonx validates it and records the raw
// bytes of each top-level member), every consecutive JSON transform edits
// that member list, and the object is written once; untouched members are
// copied byte for byte, so numbers beyond float64 precision, unicode and
// nested values pass unchanged. Payloads in other schemas, and JSON that is
// not an object, pass through unchanged, as upstream does.
package transform
