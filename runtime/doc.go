// Package runtime is Ferry's connector runtime: it loads connector
// configurations, runs each connector in its own supervised pipeline, and
// keeps the delivery promises.
//
// Sources: the runtime polls the source, applies its transforms, sends the
// batch to EVERY configured [[streams]] entry, saves the source's state,
// and only then acknowledges the batch to the source. A send or state-save
// failure is retried with capped exponential backoff (the source is told
// Nack); nothing is acknowledged that is not in Iggy.
//
// Sinks: one consumer-group member per sink stream and topic polls Iggy,
// decodes and transforms the messages and calls Consume. The group offset
// is stored only after Consume succeeds. A failing batch is retried with
// capped exponential backoff up to max_retries (messages whose error is
// connector.Permanent, or that do not decode, are not retried). Then, if
// not one message of the batch could be written and the sink's errors were
// about whole calls (not a connector.MessageErrors naming messages), the
// sink itself is failing: it restarts with backoff and the batch is read
// again. Otherwise,
// by the stream's on_error policy, the messages that still fail go to a
// dead-letter topic (with headers naming their stream, topic, partition,
// offset and the error) and the rest flows on, or the connector stops with
// status Error. Nothing is skipped silently.
//
// A source message that cannot be sent to a stream (it does not convert
// to the stream's schema, or Iggy would refuse it) goes to that stream's
// dead-letter topic, with the same id, before the state is saved
// (on_error = "dead_letter", the default), or stops the batch with status
// Error naming it (on_error = "stop"); the source then restarts from its
// saved state with backoff. Each batch is encoded once, so retries carry
// the same message ids.
//
// Isolation: every call into a connector runs under recover; a panic or
// a failure puts that connector in status Error with the reason (the stack
// goes to the log) and restarts it with backoff, while every other
// connector keeps running. Every queue between stages is bounded, so a slow
// sink slows its source instead of growing memory.
package runtime
