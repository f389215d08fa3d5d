package sysevents

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/internal/didyoumean"
)

// Type is an event type, as CloudEvents' "type" attribute and the name of
// the topic of the system stream that holds the events of that type.
type Type string

// The event types: a closed list. The broker publishes the first seventeen,
// the runtime the last two (on whatever broker it uses).
const (
	// StreamCreated: a stream was created (create_stream). Data: StreamData.
	StreamCreated Type = "stream.created"
	// StreamUpdated: a stream was renamed (update_stream). Data: StreamData
	// with PreviousName.
	StreamUpdated Type = "stream.updated"
	// StreamPurged: every partition of a stream was emptied (purge_stream).
	// Data: StreamData.
	StreamPurged Type = "stream.purged"
	// StreamDeleted: a stream was deleted with its topics (delete_stream).
	// Data: StreamData. No topic.deleted follows for its topics.
	StreamDeleted Type = "stream.deleted"

	// TopicCreated: a topic was created (create_topic). Data: TopicData.
	TopicCreated Type = "topic.created"
	// TopicUpdated: a topic was renamed or its compression, message
	// expiry or size limit changed (update_topic). Data: TopicData with
	// PreviousName when renamed.
	TopicUpdated Type = "topic.updated"
	// TopicPurged: every partition of a topic was emptied (purge_topic).
	// Data: TopicData.
	TopicPurged Type = "topic.purged"
	// TopicDeleted: a topic was deleted (delete_topic). Data: TopicData.
	TopicDeleted Type = "topic.deleted"

	// SegmentDeleted: retention (message_expiry or max_topic_size) deleted
	// one or more of a partition's oldest segments. Data: SegmentData,
	// with the range of offsets deleted.
	SegmentDeleted Type = "segment.deleted"
	// SegmentCompacted: compaction rewrote a sealed segment of a compacted
	// topic, keeping the latest message per key. Data:
	// SegmentCompactedData.
	SegmentCompacted Type = "segment.compacted"

	// GroupJoined: a client joined a consumer group. Data: GroupData.
	GroupJoined Type = "group.joined"
	// GroupLeft: a member left a consumer group: it asked to, logged out,
	// disconnected or was evicted as stale. Data: GroupData with Reason.
	GroupLeft Type = "group.left"
	// GroupRebalanced: a consumer group's assignment changed (a new
	// generation): after a join or leave, a pending revocation settled, or
	// the topic's partitions changed. Data: GroupData with Assignment.
	GroupRebalanced Type = "group.rebalanced"

	// OffsetStored: a consumer or consumer group stored an offset.
	// Coalesced: at most one event per consumer and partition per
	// second, with the last offset stored and how many stores it covers.
	// Data: OffsetData.
	OffsetStored Type = "offset.stored"

	// ClientConnected: a connection logged in (a session began). Data:
	// ClientData. Connections that never log in make no events (but
	// their failed logins do).
	ClientConnected Type = "client.connected"
	// ClientDisconnected: a session ended: the client logged out or its
	// connection closed. Data: ClientData with Reason.
	ClientDisconnected Type = "client.disconnected"

	// LoginFailed: a password or token login was refused. Data:
	// LoginData (never the password or token).
	LoginFailed Type = "login.failed"

	// ConnectorStatusChanged: a connector of the runtime changed status
	// (Starting, Running, Stopping, Stopped, Error). Data:
	// ConnectorStatusData.
	ConnectorStatusChanged Type = "connector.status_changed"
	// MessageDeadLettered: the runtime sent a message to a dead-letter
	// topic. Data: DeadLetterData.
	MessageDeadLettered Type = "message.dead_lettered"
)

// Origin says who publishes a type.
type Origin string

// Origins.
const (
	OriginBroker  Origin = "broker"
	OriginRuntime Origin = "runtime"
)

// TypeInfo describes one event type.
type TypeInfo struct {
	Type   Type
	Origin Origin
	Doc    string
}

var catalog = []TypeInfo{
	{StreamCreated, OriginBroker, "a stream was created"},
	{StreamUpdated, OriginBroker, "a stream was renamed"},
	{StreamPurged, OriginBroker, "every partition of a stream was emptied"},
	{StreamDeleted, OriginBroker, "a stream was deleted with its topics"},
	{TopicCreated, OriginBroker, "a topic was created"},
	{TopicUpdated, OriginBroker, "a topic was renamed or its compression, expiry or size limit changed"},
	{TopicPurged, OriginBroker, "every partition of a topic was emptied"},
	{TopicDeleted, OriginBroker, "a topic was deleted"},
	{SegmentDeleted, OriginBroker, "retention deleted a partition's oldest segments (with the offset range)"},
	{SegmentCompacted, OriginBroker, "compaction rewrote a segment of a compacted topic, keeping the latest message per key"},
	{GroupJoined, OriginBroker, "a client joined a consumer group"},
	{GroupLeft, OriginBroker, "a member left a consumer group (asked, logged out, disconnected, evicted)"},
	{GroupRebalanced, OriginBroker, "a consumer group's partition assignment changed"},
	{OffsetStored, OriginBroker, "a consumer stored an offset (coalesced per consumer and partition per second)"},
	{ClientConnected, OriginBroker, "a connection logged in"},
	{ClientDisconnected, OriginBroker, "a session ended (logout or closed connection)"},
	{LoginFailed, OriginBroker, "a password or token login was refused"},
	{ConnectorStatusChanged, OriginRuntime, "a connector changed status (Starting, Running, Stopping, Stopped, Error)"},
	{MessageDeadLettered, OriginRuntime, "the runtime sent a message to a dead-letter topic"},
}

var byName = func() map[Type]TypeInfo {
	m := make(map[Type]TypeInfo, len(catalog))
	for _, ti := range catalog {
		m[ti.Type] = ti
	}
	return m
}()

// Types returns the catalog, sorted by type name.
func Types() []TypeInfo {
	out := append([]TypeInfo(nil), catalog...)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// TypesOf returns the types an origin publishes, in catalog order.
func TypesOf(o Origin) []Type {
	var out []Type
	for _, ti := range catalog {
		if ti.Origin == o {
			out = append(out, ti.Type)
		}
	}
	return out
}

// Known reports whether t is in the catalog.
func (t Type) Known() bool {
	_, ok := byName[t]
	return ok
}

// Topic is the system stream's topic that holds events of type t: the
// type's own name.
func (t Type) Topic() string { return string(t) }

// Info returns t's catalog entry.
func (t Type) Info() (TypeInfo, bool) {
	ti, ok := byName[t]
	return ti, ok
}

// Lookup resolves a type name as a user typed it (surrounding spaces
// ignored, case-sensitive as the catalog). An unknown name is an error
// that suggests the closest known one and lists them all.
func Lookup(name string) (Type, error) {
	t := Type(strings.TrimSpace(name))
	if t.Known() {
		return t, nil
	}
	names := make([]string, 0, len(catalog))
	for _, ti := range Types() {
		names = append(names, string(ti.Type))
	}
	msg := fmt.Sprintf("unknown event type %q", name)
	if c := didyoumean.Closest(string(t), names); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return "", fmt.Errorf("%s; known types: %s", msg, strings.Join(names, ", "))
}

// Trigger is what a hook or sink on one event type reads: the system
// stream and the type's topic. Every message of that topic is an event of
// that type, so a trigger needs no filter; the ce_type header says the
// type too, for consumers of several topics at once.
type Trigger struct {
	Type   Type
	Stream string
	Topic  string
	// Origin says who publishes the type: OriginBroker types exist only
	// on Ferry's embedded broker (ferry run's or ferry serve's, with
	// events on); OriginRuntime types on any broker the runtime uses.
	Origin Origin
}

// TriggerFor resolves `ferry hook create NAME --on TYPE`: the stream and
// topic the hook consumes. An unknown type is Lookup's error.
func TriggerFor(name string) (Trigger, error) {
	t, err := Lookup(name)
	if err != nil {
		return Trigger{}, err
	}
	return Trigger{Type: t, Stream: Stream, Topic: t.Topic(), Origin: byName[t].Origin}, nil
}

// SegmentCompactedData is the data of segment.compacted: one segment that
// compaction rewrote. Its offsets stay; the ones removed become gaps.
type SegmentCompactedData struct {
	StreamID  uint32 `json:"stream_id"`
	Stream    string `json:"stream"`
	TopicID   uint32 `json:"topic_id"`
	Topic     string `json:"topic"`
	Partition uint32 `json:"partition"`
	// FirstOffset and LastOffset bound the segment's offsets (inclusive).
	FirstOffset       uint64 `json:"first_offset"`
	LastOffset        uint64 `json:"last_offset"`
	MessagesBefore    uint64 `json:"messages_before"`
	MessagesAfter     uint64 `json:"messages_after"`
	BytesBefore       uint64 `json:"bytes_before"`
	BytesAfter        uint64 `json:"bytes_after"`
	TombstonesRemoved uint64 `json:"tombstones_removed"`
}
