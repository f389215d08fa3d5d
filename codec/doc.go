// Package codec owns Ferry's payload formats: one Codec per upstream
// stream schema (json, raw, text, proto, avro, flatbuffer) that validates
// payloads, maps them to JSON and back, and the Converter that turns one
// schema into another.
//
// A codec is made once, at pipeline start, from the schema and its
// options (New); schema files are read and compiled then, so a bad file
// is a start-up error that names the option and the file:
//
//   - avro: avro_schema_json or avro_schema_path (parsed with hamba/avro;
//     the datums are read and written by this package, straight between
//     Avro binary and JSON bytes). Framings: a bare datum (upstream's
//     only form, the default), Avro single-object encoding, or the
//     Confluent wire format (magic byte and schema id).
//   - proto: a .proto file and a message type, compiled at start-up with
//     protocompile (no protoc), read with dynamicpb; without them a payload
//     is a google.protobuf.Any, mapped as upstream's decoder maps it.
//   - flatbuffer: a binary schema (.bfbs, `flatc --binary --schema`), as
//     upstream's newest FlatBuffers support reads; buffers are read with
//     bounds checks on every access and written with flatbuffers.Builder.
//     Text .fbs schemas are not parsed: compile them with flatc first.
//
// JSON mappings keep values and their JSON types across formats: integers
// are JSON numbers at full 64-bit precision (also protobuf int64, unlike
// the proto3 JSON spec), bytes are arrays of byte values for Avro and
// FlatBuffers (as upstream) and base64 for protobuf, enums are names.
// Decoding writes JSON bytes directly, without an intermediate value.
//
// Converter decides at start-up whether a conversion exists: the same
// schema or raw output pass bytes through; JSON and text go to and from
// every mapped codec; two mapped codecs convert through JSON; anything
// else is an error that says which schema setting is missing.
package codec
