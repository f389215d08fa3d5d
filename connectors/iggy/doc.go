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
// appends the batch again (at-least-once).
//
// The source keeps no state of its own: where it is lives in the origin's
// consumer group (consumer_group, default "ferry-<key>"), which must not be
// shared with other readers of the origin topic that commit offsets.
// Tested between two brokers of this repository (broker/brokertest, and
// ferry serve), the stand-in for Iggy servers here.
package iggy
