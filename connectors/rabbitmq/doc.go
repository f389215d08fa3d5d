// Package rabbitmq is the `rabbitmq` sink and source (AMQP 0.9.1, on
// github.com/rabbitmq/amqp091-go).
//
// # Sink
//
// The sink reads upstream's RabbitMQ sink configuration
// (libiggy_connector_rabbitmq_sink) unchanged:
//
//	amqp_url = "amqp://guest:guest@localhost:5672"  # a secret: never logged or shown
//	exchange = "iggy_events"
//	exchange_type = "topic"        # direct | topic | fanout | headers
//	routing_key = "iggy.messages"
//	durable_exchange = true        # must match an existing exchange's durability
//	delivery_mode = "persistent"   # persistent | non_persistent
//	include_metadata = true        # iggy_stream, iggy_topic, iggy_partition_id, iggy_offset headers
//	verbose_logging = false
//	max_retries = 3                # publish retries inside one Consume
//	retry_delay_secs = 1
//	max_retry_delay_secs = 5
//	timeout_secs = 30              # connect, publish and confirm
//	mandatory = false              # an unroutable message is returned: a permanent error
//	declare_exchange = true        # Ferry: false publishes to an exchange that must exist
//	max_message_size = "128MiB"    # Ferry: the server's limit; larger messages are refused before sending
//
// Every batch is published on a channel in confirm mode and Consume
// returns only when RabbitMQ confirmed every message, so the runtime
// commits the Iggy offset only for messages RabbitMQ has taken
// (upstream commits at poll time and loses a failed batch). Each message
// carries the Iggy message id as its AMQP message_id and its user headers
// as AMQP headers (strings as strings, other kinds as bytes). Delivery is
// at-least-once: a batch delivered again after a crash or an outage
// before its offset was committed is published again, and a consumer that
// must not see duplicates deduplicates by message_id.
//
// With mandatory = false (upstream's default) RabbitMQ confirms a message
// that no queue takes and drops it: after a server crash that lost a
// binding, the sink's messages are confirmed, committed and gone. Set
// mandatory = true to have such messages dead-lettered instead.
//
// A message RabbitMQ refuses (larger than max_message_size, or returned as
// unroutable with mandatory = true) is a permanent error for that
// message, with the reason, so the runtime dead-letters it and its
// neighbours are published. Set max_message_size to the server's: a
// larger message the server refuses itself closes the channel, the sink
// then publishes the unconfirmed messages one at a time to find it, and a
// message whose confirm the close swallowed is published twice; a connection that fails or a nack
// is Unavailable, so nothing is dead-lettered while the server is away.
//
// Every call to the server (the connect and handshake, channel.open,
// exchange.declare, confirm.select, a publish and its confirm) is bounded
// by timeout_secs: amqp091 gives most calls no timeout, and one that a
// server keeps the connection alive without answering (one still booting,
// or blocked) would wait for ever. A call with no answer in time closes
// the connection and fails Unavailable; the next attempt dials again.
//
// # Source
//
// The source (Ferry's; upstream has none) consumes a queue with manual
// acknowledgements and a bounded prefetch, and acknowledges a batch only
// after it is in Iggy and the runtime saved its state:
//
//	amqp_url = "amqp://guest:guest@localhost:5672"
//	queue = "orders"               # required
//	declare_queue = true           # declare it (durable_queue) if missing
//	durable_queue = true
//	exchange = ""                  # when set, the queue is bound to it with routing_key
//	exchange_type = "topic"
//	durable_exchange = true
//	routing_key = "#"
//	batch_size = 100               # most messages per batch
//	prefetch_count = 0             # unacknowledged deliveries in flight; 0 = 2 × batch_size
//	batch_wait = "100ms"           # after the first delivery, how long to wait for more
//	schema = "json"                # the payloads' format in Iggy: json | text | raw
//	include_metadata = true        # rabbitmq_exchange, rabbitmq_routing_key, rabbitmq_message_id headers
//	timeout_secs = 30              # connect, and each call of Open and Ack, as the sink's
//
// A delivery whose message_id is a UUID keeps it as the Iggy message id,
// so a redelivered message keeps its id. AMQP headers become Iggy headers
// where Iggy can carry them (scalars; keys and values of 1..255 bytes);
// tables, arrays and longer values are left out. Delivery is at-least-once: a
// crash between sending a batch to Iggy and acknowledging it to RabbitMQ
// redelivers that batch (at most prefetch_count messages); a batch the
// runtime could not deliver yet stays unacknowledged while the runtime
// retries it. State lives in RabbitMQ, not in Ferry's state store.
//
// Tested against RabbitMQ 3.10 (Debian 12's rabbitmq-server).
package rabbitmq
