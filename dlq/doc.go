// Package dlq reads and replays the runtime's dead-letter topics: the Iggy
// topics that receive the messages a connector could not deliver (package
// runtime, deadletter.go). Each dead letter holds the original payload,
// headers, key and id, and runtime.HeaderDLQ* headers naming the connector,
// where the message was (stream, topic, and a sink's partition and offset,
// or a source's index in its batch), when and why. ferry dlq and the
// management API's /{kind}s/{key}/dead_letters endpoints are built on this
// package; it talks to the Iggy server only, never to a running connector.
//
// [Topics] and [Stat] count the letters of dead-letter topics and how many
// of them replay went past; [Read] and [ReadNewest] describe letters as
// [Letter]s; [Replay] sends them again.
//
// # Idempotency
//
// A replayed message gets an id that depends on the dead letter alone, so
// a broker that deduplicates by id (ferry run's embedded broker, or Iggy
// with message_deduplication, within its window) stores each letter's
// replay once however often it is replayed, from any process. A source's
// dead letter never reached its topic: its replay keeps the letter's id,
// the id the source gave the message. A sink's dead letter is a copy of a
// message that is still in its topic, under that id: its replay gets
// [ReplayID] (a UUID v5 of the dead-letter topic, partition, offset and the
// original id) and the header [HeaderReplayOf] carrying the original id.
// Brokers deduplicate per partition, so a repeat must land where the first
// replay went: a letter with a key goes to its key's partition, one
// without to a partition picked from its id (both stable while the
// destination's partition count is). Without deduplication on the server
// a replay repeated (a From that starts over, a one-message replay after
// a bulk one) is delivered again.
//
// # Progress
//
// How far replay got is the offset of the consumer [ReplayConsumer] on
// each partition of the dead-letter topic, stored after each polled batch
// was sent (never in a dry run). The next [Replay] without From goes on
// after it; From starts elsewhere (and moves the offset from there). A
// failed send stops the replay before the offset of its batch is stored,
// so that batch is sent again next time: at-least-once, made exactly-once
// in the topic by the ids above. A one-message replay ([ReplayOptions].One)
// neither reads nor moves the offset, so it never makes a later bulk
// replay skip the letters before it. The offset is consumer state on the
// Iggy server; the runtime keeps none of it.
package dlq
