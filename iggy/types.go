package iggy

import (
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
)

// Protocol types, re-exported so callers rarely import package wire.
type (
	// Identifier names a stream, topic or consumer group by id or name.
	Identifier = wire.Identifier
	// Partitioning picks the partition of a send.
	Partitioning = wire.Partitioning
	// PollingStrategy says where a poll starts.
	PollingStrategy = wire.PollingStrategy
	// Consumer is who polls or owns an offset: a single consumer or a group.
	Consumer = wire.Consumer
	// OptPartition is an optional partition id.
	OptPartition = wire.OptPartition

	// Reply types of the admin calls; see package wire for their fields.
	StreamHeader       = wire.StreamHeader
	StreamDetails      = wire.StreamDetails
	TopicHeader        = wire.TopicHeader
	TopicDetails       = wire.TopicDetails
	PartitionInfo      = wire.PartitionInfo
	GroupHeader        = wire.GroupHeader
	GroupDetails       = wire.GroupDetails
	GroupMember        = wire.GroupMember
	ConsumerOffsetInfo = wire.ConsumerOffsetInfo
	SendConfirmation   = wire.SendConfirmation
	Stats              = wire.Stats
	ClusterMetadata    = wire.ClusterMetadata
	ClusterNode        = wire.ClusterNode
	ClientInfo         = wire.ClientInfo
	PATInfo            = wire.PATInfo
	OptionDescriptor   = wire.OptionDescriptor

	// Entry is one key/value pair of user headers or topic options
	// (package header's Header).
	Entry = header.Header
	// Value is a typed header or option value.
	Value = header.Value
	// ValueKind is the type tag of a Value.
	ValueKind = header.Kind
)

// NumericID identifies a resource by its numeric id.
func NumericID(id uint32) Identifier { return wire.NumericID(id) }

// NamedID identifies a resource by name (1..255 bytes of UTF-8).
func NamedID(name string) Identifier { return wire.NamedID(name) }

// ParseID returns a numeric identifier for a decimal string and a named
// one otherwise, as the Iggy CLI reads them.
func ParseID(s string) Identifier { return wire.ParseID(s) }

// Balanced spreads sends over the partitions, round robin per send,
// resolved on the client (see SendMessages).
func Balanced() Partitioning { return wire.Balanced() }

// ToPartition sends to one partition.
func ToPartition(id uint32) Partitioning { return wire.ToPartition(id) }

// ByKey sends to XXH32(key) % partitions; key is 1..255 bytes.
func ByKey(key []byte) Partitioning { return wire.ByKey(key) }

// First polls from the first message of the partition.
func First() PollingStrategy { return wire.First() }

// Last polls the last count messages.
func Last() PollingStrategy { return wire.Last() }

// Next polls after the consumer's stored offset (from 0 if none is stored).
func Next() PollingStrategy { return wire.Next() }

// AtOffset polls from an offset.
func AtOffset(offset uint64) PollingStrategy { return wire.AtOffset(offset) }

// AtTimestamp polls messages appended at or after us, in µs since the epoch.
func AtTimestamp(us uint64) PollingStrategy { return wire.AtTimestamp(us) }

// Partition names a partition in a poll or offset call.
func Partition(id uint32) OptPartition { return wire.Partition(id) }

// AnyPartition leaves the partition out of a poll or offset call; the
// server then uses partition 0 for a single consumer.
func AnyPartition() OptPartition { return OptPartition{} }

// SingleConsumer is a standalone consumer. A named consumer is keyed on
// the server by XXH32 of its name.
func SingleConsumer(id Identifier) Consumer { return Consumer{Kind: wire.ConsumerSingle, ID: id} }

// ConsumerGroup is a consumer group as the consumer of a poll or an
// offset, by id or name. (The reader type for groups is GroupConsumer.)
func ConsumerGroup(id Identifier) Consumer { return Consumer{Kind: wire.ConsumerGroup, ID: id} }

// Header builds a user-header entry with a string key.
func Header(key string, v Value) Entry { return header.New(key, v) }

// StringValue is a UTF-8 string header or option value (1..255 bytes).
func StringValue(s string) Value { return header.StringValue(s) }

// RawValue is a raw-bytes header value (1..255 bytes).
func RawValue(b []byte) Value { return header.RawValue(b) }

// BoolValue is a bool value.
func BoolValue(b bool) Value { return header.BoolValue(b) }

// Int64Value is an int64 value.
func Int64Value(v int64) Value { return header.Int64Value(v) }

// Uint32Value is a uint32 value.
func Uint32Value(v uint32) Value { return header.Uint32Value(v) }

// Uint64Value is a uint64 value.
func Uint64Value(v uint64) Value { return header.Uint64Value(v) }
