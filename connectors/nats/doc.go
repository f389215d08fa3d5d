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
// Tested against nats-server 2.9.10 (Debian 12's nats-server).
package nats
