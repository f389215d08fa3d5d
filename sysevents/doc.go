// Package sysevents defines Ferry's system events: the closed catalog of
// event types (Types, with a doc line each), the CloudEvents 1.0 JSON
// envelope they travel in (Event, New, Decode), the data of each type
// (StreamData, SegmentData, ...) and where each is published (Stream,
// Type.Topic, TriggerFor). It imports only iggy/wire and iggy/header: the
// broker appends events through its own storage and the runtime sends
// them through its client, so neither imports the other.
//
// # Where events go
//
// One system stream, "ferry.events" (Stream; Iggy allows '.' in names),
// with one topic of one partition per event type, named as the type:
// ferry.events/segment.deleted, ferry.events/connector.status_changed,
// and so on. Every message of a topic is an event of that type, so a
// trigger (a hook, or any sink) on one type consumes one topic and needs
// no filter, and is ordered, replayable, retried and dead-lettered as any
// sink is. Each message also carries the type in the Iggy header
// ce_type (HeaderType) and the event id in ce_id, for consumers of
// several topics at once; the message id is the event id's 16 bytes.
// Order holds within a type (one partition); across types, compare the
// events' time.
//
// On Ferry's embedded broker (ferry run's, ferry serve's) the broker
// makes the stream at start, with id ReservedStreamID (the highest u32, so
// user streams keep the ids 0, 1, 2, ... they had without events) and all
// topics, with SegmentSize segments, DefaultMaxTopicSize and
// DefaultMessageExpiry (configurable: broker.Events, ferry serve
// --events-max-size, --events-expiry). The broker publishes the first
// seventeen types of the catalog (OriginBroker); the runtime adds
// connector.status_changed and message.dead_lettered (OriginRuntime) on
// whatever broker it uses. Against an external Iggy server only the
// runtime's two types exist.
//
// # The envelope
//
// CloudEvents 1.0 in its JSON format: specversion "1.0", id, source
// ("/ferry/broker" or "/ferry/runtime"), type, time (RFC 3339, UTC),
// subject (the resource, e.g. "streams/s/topics/t/partitions/0"),
// datacontenttype "application/json" and data (an object). The id is a
// UUID (version 8) derived from source, type and a key naming the
// occurrence (MessageID), so an event published twice has one id: keys
// are natural where one exists (a topic's never-reused uid, a segment
// range, an offset, a dead letter's partition and offset) and a
// publisher instance plus sequence number otherwise.
//
// # Guarantees and what is left out
//
// Events are a best-effort record: publishers never block the broker or
// a connector, so a full queue drops events (and counts them in
// iggy_broker_events_dropped_total or ferry_runtime_events_dropped_total),
// and events still queued when a process is killed are lost. Once
// appended they are ordinary messages. offset.stored is coalesced per
// consumer and partition per second. Events about the system stream
// itself (its topics, groups, offsets) are never published, so a trigger
// cannot make events for ever. Not published: sends and polls (use the
// metrics), users and tokens changed, partitions added or deleted
// (topic.updated is not sent for them), segments deleted by
// delete_segments (only retention's).
//
// Tested: envelope fields against an independent check of the CloudEvents
// JSON rules (sysevents, broker and runtime tests); Decode fuzzed
// (FuzzDecode); each type published at least once (broker
// TestEventsEveryBrokerType, runtime TestEvents*).
package sysevents
