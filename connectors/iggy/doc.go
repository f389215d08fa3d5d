// Package iggy is Ferry's iggy source: it reads a topic of another Iggy
// server (or another stream of the same one) through a consumer group and
// sends the messages on, with their ids, headers and origin timestamps
// unchanged — replication between clusters, and migration between
// servers:
//
//	type = "source"
//	key = "replica"
//	path = "iggy"
//	[[streams]]
//	stream = "orders"          # where the copies go
//	topic = "orders"
//	schema = "raw"             # payloads byte for byte
//	[plugin_config]
//	address = "origin.example:8090"   # or a connection string
//	username = "replicator"
//	password = "${ORIGIN_PASSWORD}"
//	stream = "orders"
//	topic = "orders"
//
// Delivery: the consumer group's offset on the origin is stored only after
// the batch is in the destination (the runtime's acknowledgement), so a
// kill -9 at any point replays at most the batches not yet acknowledged,
// with the ids they had. A destination that deduplicates by id (ferry
// serve --dedup-max-entries, upstream's message_deduplication) appends
// them once: zero lost, zero duplicated. Without deduplication, a replay
// appends the batch again (at-least-once). A destination that restarts
// forgets the ids it deduplicates by (ferry serve's, as upstream's, live
// in memory), so a batch it appended just before it went away and sent
// again after may be there twice.
//
// The source keeps no state of its own: where it is lives in the origin's
// consumer group (consumer_group, default "ferry-<key>"), which must not be
// shared with other readers of the origin topic that commit offsets.
//
// Names: stream, topic and consumer_group are 1..255 bytes of UTF-8,
// checked when the file is read; a stream or topic that is a decimal
// number without leading zeros is a numeric id ("007" is a name).
//
// Iggy's batch format holds each message's origin timestamp as a 32-bit
// µs offset from the batch's earliest, so messages more than about 71.6
// minutes apart (the backlog of a quiet topic, written over hours) cannot
// share a batch: iggy.Client.SendMessages sends them as several, in order
// (TestOriginTimestampsHoursApart).
//
// Tested against brokers of this repository, the stand-in for Iggy
// servers here: in-process (broker/brokertest) for the conformance suite,
// hostile names and payloads, and ten kill -9 of the runtime over a
// million messages; and between two broker processes — what ferry serve
// runs, on data directories, started by the test binary (not the ferry
// binary) — with the origin, then in another test the destination,
// killed -9 and started again on the same port and data three times
// mid-stream while the runtime, a third process, recovers by itself:
// nothing lost, and after the origin's outages every message once in the
// destination, after the destination's at most a batch a kill twice.
package iggy
