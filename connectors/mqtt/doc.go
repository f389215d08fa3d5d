// Package mqtt is the `mqtt` sink and source (MQTT 3.1.1, on
// github.com/eclipse/paho.mqtt.golang v1.5.1). Upstream Iggy has no MQTT
// connector: the keys are Ferry's, named as Redpanda Connect's mqtt
// output and input name them (urls, client_id, user, password,
// connect_timeout, keepalive, topic, topics, qos, retained,
// write_timeout, clean_session); keys marked "Ferry" in the spec are
// Ferry's own, the TLS keys named as Ferry's Kafka connector names them.
//
// # Sink
//
//	urls = ["tcp://localhost:1883"]   # tcp:// mqtt:// ssl:// tls:// mqtts://
//	topic = "iggy/{stream}/{topic}"  # {stream} {topic} {partition}; no + or #
//	qos = 1                          # 0 | 1 | 2
//	retained = false
//	client_id = ""                   # "" = random
//	user = ""
//	password = ""                    # a secret: never logged or shown
//	write_timeout = "30s"
//	max_message_size = "256MiB"      # Ferry: the broker's message_size_limit
//	tls_ca_file = ""                 # Ferry, sink and source: see TLS below
//	tls_cert_file = ""
//	tls_key_file = ""
//	tls_skip_verify = false
//
// Consume publishes a batch pipelined and returns only when the broker
// acknowledged every message (PUBACK at QoS 1, PUBCOMP at QoS 2, with the
// context and write_timeout bounding the wait); at QoS 0 it returns once
// each is written to the connection, and a broker that goes away may lose
// what it had not routed. The runtime commits the Iggy offset only then.
// A lost or stuck connection is Unavailable: the runtime retries the
// batch and restarts the sink with backoff, and the batch is published
// again, whole.
//
// MQTT 3.1.1 carries no message id and no headers, so a subscriber
// cannot tell a repeat: at QoS 1 a batch published again after a crash,
// an outage or a lost acknowledgement arrives twice (up to a batch per
// failure); QoS 2 is exactly-once only within one MQTT session, and the
// sink starts a clean session on each connection, so a replay by the
// runtime repeats at QoS 2 as well. Iggy's headers and ids are dropped.
//
// The topic's template is checked at load: no wildcards, no NUL or
// control characters, valid UTF-8, not starting with $. A stream or
// topic name that makes the rendered topic one of those is a permanent
// error for every message of the batch (dead-lettered with the reason),
// since mosquitto disconnects a client that sends such a topic. A
// PUBLISH larger than max_message_size is refused before it is sent and
// dead-lettered: an MQTT 3.1.1 broker drops an oversized message without
// telling the publisher. No other refusal exists in MQTT 3.1.1.
//
// # Source
//
//	urls = ["tcp://localhost:1883"]
//	topics = ["sensors/+/temperature", "alerts/#"]
//	qos = 1                          # the subscription's QoS
//	clean_session = false            # a persistent session (the default here)
//	client_id = "ferry-sensors"      # required with clean_session = false
//	skip_retained = false            # Ferry: drop (and acknowledge) retained messages
//	batch_size = 100                 # Ferry
//	batch_wait = "100ms"             # Ferry
//	schema = "json"                  # Ferry: json | text | raw
//	include_metadata = true          # Ferry: mqtt_topic, mqtt_qos, mqtt_retained, mqtt_duplicate headers
//	[plugin_config.topic_routes]     # Ferry: filter → Iggy topic (longest filter wins)
//	"alerts/#" = "alerts"
//
// The source subscribes in a persistent session under client_id, so the
// broker keeps QoS 1 and 2 messages while Ferry is away, and it turns off
// paho's acknowledgement on handler return (SetAutoAckDisabled): a
// message is acknowledged (PUBACK, or PUBREC at QoS 2) only in Ack, after
// its batch is in Iggy and the runtime saved it, and acknowledgements go
// out in the order of the deliveries, as MQTT asks; skipped retained
// messages are acknowledged in that order too. A batch the runtime could
// not deliver yet stays unacknowledged while the runtime retries it.
// Close makes a round trip before disconnecting, so its last
// acknowledgements are not lost to a reset connection.
//
// MQTT 3.1.1 gives a message no id that lasts (the packet id is reused),
// so Ferry gives each message a new UUID: a message the broker sends
// again gets a new id, and Iggy-side deduplication cannot remove it.
// Repeats come from a crash or a lost connection between a batch's
// arrival in Iggy and its acknowledgement reaching the broker: the
// broker sends the unacknowledged messages again (mqtt_duplicate set) —
// at most the batches in delivery, two of batch_size, per failure. At
// QoS 2 the broker never sends again what was acknowledged with PUBREC,
// so repeats are the same bounded window. At QoS 0, and with
// clean_session = true, what arrives while Ferry is away is lost.
//
// A broker that crashes and comes back on its persistence file sends
// again what it had delivered but whose acknowledgement it had not saved
// — each such message once per crash — and may lose what it had
// acknowledged to a publisher in the turn the crash cut short. mosquitto
// saves only at autosave points, and an acknowledgement is not a change
// autosave_on_changes counts (new messages, subscriptions and retained
// messages are): what Ferry acknowledged after the last message the
// broker received comes again, which can be far more than two batches
// when the stream pauses before the crash. The source notices the lost
// connection, the runtime restarts it with backoff until the broker is
// back, and the session's queue is delivered then.
//
// An empty message (MQTT allows one; clearing a retained message
// publishes one to the live subscribers) is passed over with a warning
// and acknowledged in order: Iggy refuses an empty payload, and could not
// dead-letter one, so forwarding it would fail its batch on every
// delivery. Other payloads are carried byte for byte (schema = "raw" for
// binary ones); topics are any MQTT allows (unicode, spaces, empty
// levels, a $ prefix an application chose, up to 65535 bytes), and
// mqtt_topic is left out for a topic longer than a header holds (255
// bytes).
//
// What the broker keeps for an offline session is its business: mosquitto
// keeps at most max_queued_messages (default 1000) and sends at most
// max_inflight_messages (default 20) unacknowledged, so a batch holds at
// most that many messages and a long absence can overflow the queue.
// Overlapping filters may deliver a message once per matching
// subscription (broker-dependent).
//
// # TLS
//
// An ssl:// (tls://, mqtts://) URL connects with TLS 1.2 or later,
// verifying the broker's certificate against tls_ca_file (a PEM bundle)
// or, when it is empty, the system's CAs, and the host of the URL.
// tls_cert_file and tls_key_file (PEM, together) give the client
// certificate a broker with require_certificate asks for;
// tls_skip_verify turns verification off (testing only). The files are
// read when the connector is built, each checked against the runtime's
// allowed directories first: a missing, unreadable or bad file, a key
// that is not the certificate's, or a TLS key without a TLS URL is a
// configuration error naming the key. A failed verification or a
// refused client certificate is an error with a hint naming the key to
// look at (the runtime retries it with backoff). There is no key for the
// server name: it is the URL's host.
//
// Tested against mosquitto 2.0.11 (Debian 12's), plain and with TLS
// (with and without require_certificate, on certificates the tests
// make); package internal/mqtttest runs it.
package mqtt
