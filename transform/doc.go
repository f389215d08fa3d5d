// Package transform holds the transforms a connector applies to messages in
// flight, configured as upstream's `[transforms.<name>]` tables and applied
// in file order: between decode and encode in a source, between decode and
// Consume in a sink.
//
// A transform changes a message in place or drops it (Apply returns false;
// the runtime counts it in messages_filtered). Transforms on JSON work on the
// payload bytes and touch only the fields they name; payloads in other
// schemas, and JSON that is not an object, pass through unchanged, as
// upstream does.
package transform
