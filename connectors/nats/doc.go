// Package nats is the `nats` sink and source (NATS, on
// github.com/nats-io/nats.go and its jetstream package). Upstream Iggy
// has no NATS connector: every key is Ferry's, named as the nats CLI and
// Redpanda Connect's nats inputs and outputs name them.
//
// Both connectors share the connection keys:
//
//	url = "nats://127.0.0.1:4222"  # a secret: may hold credentials; comma-separated for a cluster
//	username = ""                  # with password
//	password = ""                  # a secret
//	token = ""                     # a secret
//	credentials_file = ""          # a .creds file (JWT + NKey seed)
//	name = "ferry"                 # the connection name the server shows
//	mode = "jetstream"             # jetstream | core
//	timeout = "30s"                # connect, acknowledgement and request timeout
//
// TLS is what a tls:// URL gives (the system's roots); client
// certificates are not configurable yet.
//
// # Sink
//
//	subject = "iggy.{stream}.{topic}"  # {stream}, {topic}, {partition}: the Iggy message's
//	stream = ""                    # jetstream: the stream subjects must land in (checked at start and per publish)
//	include_metadata = true        # Iggy-Stream, Iggy-Topic, Iggy-Partition, Iggy-Offset, Iggy-Origin-Timestamp headers
//	max_in_flight = 4096           # jetstream: publishes awaiting their acknowledgement at once
//
// The subject is checked at start and again once the Iggy names are
// filled in: no wildcards (* or >), no spaces or control characters, no
// empty tokens. A batch whose stream or topic name makes no valid
// subject is dead-lettered with the reason; nothing from a name or a
// payload reaches the protocol unchecked. Iggy headers become NATS
// headers (string values as they are, other kinds as text); keys with
// ':', spaces or control characters, values with CR or LF, and keys
// starting with "Nats-" (which would steer JetStream: Nats-Msg-Id,
// Nats-Expected-*, Nats-Rollup) are left out.
//
// In jetstream mode (the default) every message of a batch is published
// asynchronously and Consume returns only when JetStream acknowledged
// each one, so the runtime commits the Iggy offset only for messages
// stored in a stream. Each message carries the Iggy message id as its
// Nats-Msg-Id header, and JetStream drops a message whose id it stored
// within the stream's duplicate window (`duplicate_window`, 2 minutes by
// default): a batch delivered again after a crash, an outage or a retry
// is stored once. Duplicates remain possible only when the copy comes
// later than the window (a sink down longer than that between publishing
// and committing), or when the stream's window is 0. A message the
// server refuses (4xx: above the stream's max_msg_size, the wrong stream)
// or above the server's max_payload is a permanent error for that
// message, with the server's reason, so the runtime dead-letters it;
// no responders, timeouts and lost connections are Unavailable: the
// runtime keeps the batch, restarts the sink with backoff and publishes
// it again.
//
// In core mode the sink publishes to plain subjects and Consume returns
// once the server has read the batch (a flush). Core NATS keeps
// nothing: a message no subscriber is listening for, or one a slow
// subscriber is sent while its buffer is full, is lost, and a flush
// that fails makes the runtime publish the batch again (at-least-once
// towards the server, at-most-once towards subscribers).
//
// # Source
//
//	stream = "ORDERS"              # jetstream: the stream read (required there)
//	subject = ""                   # jetstream: the filter subject; core: the subject subscribed to (required)
//	durable = "ferry"              # jetstream: the durable consumer, which keeps the position
//	deliver = "all"                # jetstream: all | new | last | last_per_subject, for a new consumer
//	ack_wait = "30s"               # jetstream: redelivery after this long without an acknowledgement
//	max_ack_pending = 1000         # jetstream: delivered, not yet acknowledged (at least batch_size)
//	queue = ""                     # core: a queue group
//	buffer_size = 65536            # core: messages held between polls
//	batch_size = 100
//	batch_wait = "100ms"           # how long a batch waits to fill
//	schema = "json"                # json | text | raw
//	include_metadata = true        # nats_subject, nats_stream, nats_sequence headers
//
// In jetstream mode the source creates (or updates) a durable pull
// consumer with explicit acknowledgements, fetches up to batch_size
// messages at a time, and acknowledges a batch's messages only in the
// runtime's Ack, after the batch is in Iggy and its state saved; the Ack
// waits for the server to have read them (a flush). While a batch waits
// (the runtime retrying Iggy), its messages are kept alive with
// in-progress acknowledgements every third of ack_wait, so JetStream
// does not redeliver them meanwhile. A message's Iggy id is its
// Nats-Msg-Id when the publisher set one (the UUID it spells, or 16
// bytes of its SHA-256), else 8 bytes naming the stream and the 8-byte
// stream sequence: a redelivered message keeps its id. Delivery is
// at-least-once: a crash between sending a batch to Iggy and
// acknowledging it redelivers its messages after ack_wait (at most
// max_ack_pending), with the same ids. Through a server outage the
// connection reconnects for ever and the source goes on by itself;
// messages whose acknowledgement was lost with the server come again,
// with the same ids. On Close the messages of batches never
// acknowledged are given back at once (a Nak). State lives in the
// durable consumer, not in Ferry's state store; an existing consumer's
// deliver policy cannot be changed (the server refuses, and Open says
// so). NATS headers become Iggy string headers (several values joined
// by ", "), those outside Iggy's 1..255 bytes left out. The stream and
// durable names are checked at start (not empty; no '.', '*', '>', '/',
// '\', whitespace or control characters: an empty durable would be an
// ephemeral consumer, its position lost), as is the queue group (no
// whitespace).
//
// Iggy refuses empty payloads (and so could not even dead-letter one): a
// message without data (a header-only message, say) is passed over with
// a warning, acknowledged at once in jetstream mode.
//
// In core mode the source subscribes to the subject (in a queue group
// when set): at-most-once. Nothing is acknowledged; messages published
// while the source is not subscribed, held in its buffer at a crash, or
// beyond buffer_size are lost. Their ids come from Nats-Msg-Id when set,
// else Ferry assigns them.
//
// Tested against nats-server 2.9.10 (Debian 12's nats-server).
package nats
