// Package kafka is the `kafka` sink and source, on franz-go
// (github.com/twmb/franz-go/pkg/kgo). Upstream Iggy has no Kafka
// connector, so every key is Ferry's, named as Kafka's own clients name
// the setting (bootstrap.servers, group.id, auto.offset.reset, ...).
//
// # Keys both share
//
//	brokers = ["localhost:9092"]   # required, host:port
//	client_id = "ferry"
//	sasl_mechanism = "none"        # none | PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
//	sasl_username = ""
//	sasl_password = ""             # a secret: never logged or shown
//	tls = false                    # tls_ca_file, tls_cert_file, tls_key_file, tls_skip_verify
//	timeout = "30s"                # dial/request; the sink's per-batch wait; the source's commit
//
// GSSAPI (Kerberos), OAUTHBEARER and AWS_MSK_IAM are refused (an unknown
// sasl_mechanism is a configuration error naming the key).
//
// # Sink
//
//	topic = "iggy-{stream}-{topic}" # required; {stream}/{topic} are the Iggy names,
//	                                # characters Kafka forbids become '_'
//	compression = "none"           # none | gzip | snappy | lz4 | zstd
//	max_message_bytes = "1MiB"     # a larger record is dead-lettered before it is sent
//	include_metadata = true        # iggy_stream, iggy_topic, iggy_partition_id, iggy_offset, iggy_message_id
//	allow_auto_topic_creation = false
//
// The producer is franz-go's idempotent one with acks=all and its
// default (sticky, key-hashed murmur2) partitioner. The record key is the
// message's `key` user header (iggy.KeyHeader, as `ferry message send
// --key` and package live write it); the other user headers become Kafka
// headers (strings and raw values as their bytes, other kinds as their
// decimal text); the timestamp is the origin timestamp. Consume returns
// only when Kafka acknowledged every record of the batch, so the runtime
// commits the Iggy offset only after that. A record the cluster refuses
// on its own (MESSAGE_TOO_LARGE, INVALID_RECORD, ...) is sent again
// alone, and if refused alone it is a permanent error with the broker's
// reason (dead-lettered) while its neighbours are written. A cluster that
// does not answer within timeout is Unavailable: nothing is
// dead-lettered, the client is dropped (the idempotent producer would
// retry a record of unknown fate for ever) and the next try makes a new
// one.
//
// Duplicates: delivery is at-least-once. A kill or outage between
// Kafka's acknowledgement and Iggy's offset commit sends the batch again
// after the restart, and the idempotent producer does not deduplicate
// across producer sessions (a new client is a new producer id), so
// those records are in Kafka twice. The same holds for a batch that
// timed out (its records may have been written). Consumers deduplicate
// with the iggy_message_id header.
//
// # Source
//
//	topics = ["orders"]            # required
//	consumer_group = "ferry"       # required (group.id)
//	start_offset = "earliest"      # earliest | latest, for partitions without a committed offset
//	batch_size = 500               # most records per batch (max.poll.records)
//	fetch_max_wait = "500ms"
//	session_timeout = "45s"
//	rebalance_timeout = "60s"      # a killed member holds a rebalance up this long
//	schema = "json"                # json | text | raw
//	include_metadata = true        # kafka_topic, kafka_partition, kafka_offset headers
//
// The source is a member of a consumer group with auto-commit off. The
// offsets after a batch are committed to Kafka (a synchronous commit)
// only in Ack, after the batch is in Iggy; a Nack commits nothing. On a
// rebalance, OnPartitionsRevoked commits what was acked of the
// partitions leaving, and forgets them: a batch polled from them that is
// acked later is not committed, so the new owner reads it again. Lost
// partitions commit nothing. The group's committed offsets are the
// source's position; Ferry's state store is not used. Message ids are a
// UUID (v5) of topic, partition and offset, so a record read again has
// the same id. The record key becomes the `key` header (a string when it
// is UTF-8, else raw bytes); Kafka headers become user headers where
// Iggy can carry them (keys and values 1..255 bytes, one value per key:
// the first); a key over 255 bytes, an empty header value, or a Kafka
// header named `key` is left out.
//
// Duplicates: a kill between a batch reaching Iggy and its commit, or a
// rebalance, reads the batch again: at most the records polled and not
// committed (one batch plus the one read ahead, 2 × batch_size, per
// partition owner). A killed member holds its partitions, and the
// rebalance its successor starts, until session_timeout and
// rebalance_timeout pass: lower both where restarts must be quick.
//
// # Tested against
//
// No Kafka broker could be installed here: every test runs against
// franz-go's in-process fake cluster, kfake (pkg/kfake at
// v0.0.0-20260918054303-01f206a7e32c, with kgo v1.22.3), one broker;
// the kill -9 test keeps kfake in the test process while the runtime
// child is killed, and the outage test closes kfake and starts it again
// on the same port from its DataDir. kfake does not model what a real
// cluster does with replication (acks=all means one replica here,
// min.insync.replicas and ISR shrinking are not exercised), leader
// elections and partition movement under load, log segments, retention
// and compaction timing, broker-side quotas and throttling, real
// network partitions, or the performance of a real broker; its group
// coordinator, idempotence and MESSAGE_TOO_LARGE checks are its own
// implementations of the protocol. TLS was not tested (no certificates
// are generated here); SASL SCRAM-SHA-256 was, against kfake's SASL.
package kafka
