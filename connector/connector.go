package connector

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Schema names the format of message payloads, as in upstream's
// `schema = "..."` stream setting.
type Schema string

// Schemas known to Ferry.
const (
	SchemaJSON       Schema = "json"
	SchemaRaw        Schema = "raw"
	SchemaText       Schema = "text"
	SchemaProto      Schema = "proto"
	SchemaAvro       Schema = "avro"
	SchemaFlatBuffer Schema = "flatbuffer"
)

// Message is one message moving through Ferry.
type Message struct {
	// ID is the message id; all zero means Ferry assigns a UUID v7 when it
	// sends the message to Iggy.
	ID [16]byte
	// Headers are Iggy user headers; see Header and SetHeader.
	Headers []Header
	// Payload is the message body, in the batch's Schema.
	Payload []byte
	// OriginTimestamp is when the message was made; zero means "when sent".
	OriginTimestamp time.Time

	// Route, on a message a source's transforms made (a wasm route
	// verdict), sends it to this topic of each of the source's streams
	// instead of the stream's own topic. Empty: the stream's topic.
	Route string

	// The fields below are set on messages a sink consumes.

	Stream, Topic string
	Partition     uint32
	Offset        uint64
	// Timestamp is when the broker appended the message.
	Timestamp time.Time
	Checksum  uint64
}

// Batch is what a source's Poll returns.
type Batch struct {
	// Schema is the format of every payload in the batch. Empty means JSON.
	Schema   Schema
	Messages []Message
	// State is the source's state after this batch (for example the last id
	// read); nil leaves the saved state as it is. The runtime saves it after
	// the batch is in Iggy and before Ack, and hands the last saved state to
	// Open after a restart.
	State []byte
	// ValidJSON, on a JSON batch, says the source checked that every
	// payload is a valid JSON document, so the runtime's transforms do not
	// check them again. A source that cannot promise it leaves it false.
	ValidJSON bool
}

// Source reads an external system.
//
// The runtime calls Open once, then Poll in a loop from one goroutine, and
// Close once after the last Poll returned. It reads one batch ahead: Poll
// may be called for the next batch while the previous one is still being
// delivered, and Ack and Nack come in the order the batches were polled.
// A source therefore keeps its read position in memory and reports its
// durable position through Batch.State, which the runtime saves in order.
type Source interface {
	// Open prepares the source. state is the State of the last batch the
	// runtime saved, or nil on the first run.
	Open(ctx context.Context, state []byte) error
	// Poll blocks until it has messages, then returns them. It returns
	// ctx.Err() when ctx ends, ErrEndOfInput when there will never be more,
	// and may return an empty batch to report only a new State. Any other
	// error counts as a failure of the connector: the runtime logs it and
	// retries with backoff.
	Poll(ctx context.Context) (*Batch, error)
	// Close releases resources.
	Close(ctx context.Context) error
}

// Acker is implemented by sources that act when a batch becomes durable,
// such as deleting rows read or confirming a replication position.
type Acker interface {
	// Ack is called after the batch was sent to every configured stream and
	// its State was saved. An error is logged and counted; the batch is
	// already delivered and is not sent again.
	Ack(ctx context.Context, b *Batch) error
	// Nack is called when sending or saving failed; the runtime will send
	// the same batch again after a backoff.
	Nack(ctx context.Context, b *Batch, cause error)
}

// SinkBatch is what a sink's Consume receives: messages of one partition,
// in offset order.
type SinkBatch struct {
	Stream, Topic string
	Partition     uint32
	// Schema is the payload format after the stream's decoding and the
	// connector's transforms.
	Schema   Schema
	Messages []Message
}

// Sink writes to an external system.
//
// The runtime calls Open once, then Consume for each batch, one at a time
// per stream, then Close. It stores the Iggy consumer offset of a batch only
// after Consume returned nil for it.
type Sink interface {
	Open(ctx context.Context) error
	// Consume writes the batch. nil means every message is durably written.
	// An error means none or only some were: the runtime retries the batch
	// with backoff, so writes should be idempotent (for example keyed by the
	// message id). Return a MessageErrors to say exactly which messages
	// failed, and mark each error with what it is about:
	//
	//   - Permanent: this message can never be written (a rejected record,
	//     a 4xx answer). It is not retried; it goes to the dead-letter path.
	//   - Unavailable: the destination is down or overloaded (connection
	//     refused, a timeout, 429 or 5xx). Nothing is dead-lettered and the
	//     batch's offset is not committed: after its retries the runtime
	//     restarts the sink with backoff (1 s doubling to 1 min) and
	//     delivers the whole batch again, so messages already written may
	//     be written twice. Unavailable wins: one Unavailable entry in a
	//     MessageErrors keeps every message of the batch from the
	//     dead-letter path until the destination is back.
	//   - unmarked: retried; when a whole-call error persists, the runtime
	//     tries each message on its own and dead-letters only those that
	//     keep failing while their neighbours are written. A sink whose
	//     every message fails with unmarked whole-call errors is taken to
	//     be down, as with Unavailable.
	Consume(ctx context.Context, b *SinkBatch) error
	Close(ctx context.Context) error
}

// UnorderedSink is implemented by a sink whose writes do not depend on
// getting a partition's messages in offset order (each message is written
// on its own terms, deduplicated by id if at all). Only such a sink may
// read a stream with ordering = "key" or "none": the runtime then calls
// Consume for one stream and partition several times at once, each batch
// holding one key's messages (in order) or one lane's.
type UnorderedSink interface {
	Sink
	// ConsumesOutOfOrder marks the sink; it is never called.
	ConsumesOutOfOrder()
}

// ActivityReporter is implemented by a connector that keeps a record of
// its recent work, such as the exec sink's last command runs; the
// management API serves it as JSON at GET /{kind}s/{key}/activity while
// the connector runs. Activity must be safe to call at any time.
type ActivityReporter interface {
	Activity() any
}

// ErrEndOfInput is returned by Poll when a source has nothing more to read;
// the runtime stops that source cleanly.
var ErrEndOfInput = errors.New("end of input")

// Permanent marks an error that retrying cannot fix (a rejected record, a
// 4xx answer); the runtime sends the affected messages to the dead-letter
// path at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ error }

func (e *permanentError) Unwrap() error { return e.error }

// Unavailable marks an error that says the destination is down or
// overloaded rather than that a message is bad: a connection refused or
// lost, a timeout, a server shutting down, 429 or 5xx. The runtime keeps
// the batch, backs off and tries again (restarting the sink), and
// dead-letters nothing; see Sink.Consume.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err}
}

// IsUnavailable reports whether err was marked with Unavailable. It does
// not look inside a MessageErrors: its entries are marked one by one.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

type unavailableError struct{ error }

func (e *unavailableError) Unwrap() error { return e.error }

// MessageErrors reports per-message failures of a Consume: the messages
// not listed were written. Keys are indexes into SinkBatch.Messages.
type MessageErrors map[int]error

func (m MessageErrors) Error() string {
	if len(m) == 0 {
		return "no message failed"
	}
	first := -1
	for i := range m {
		if first < 0 || i < first {
			first = i
		}
	}
	if len(m) == 1 {
		return fmt.Sprintf("message %d: %v", first, m[first])
	}
	return fmt.Sprintf("%d messages failed; first, message %d: %v", len(m), first, m[first])
}
