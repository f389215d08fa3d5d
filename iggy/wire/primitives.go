package wire

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Identifier names a stream, topic or consumer group by numeric id or by name.
// The zero value is invalid; build one with NumericID or NamedID.
type Identifier struct {
	kind uint8 // 1 numeric, 2 string
	num  uint32
	name string
}

// NumericID identifies a resource by its numeric id.
func NumericID(id uint32) Identifier { return Identifier{kind: 1, num: id} }

// NamedID identifies a resource by name. A name must be 1..255 bytes of UTF-8;
// Validate reports otherwise.
func NamedID(name string) Identifier { return Identifier{kind: 2, name: name} }

// ParseID returns a numeric identifier for a decimal string and a named one
// otherwise, as the Iggy CLI does.
func ParseID(s string) Identifier {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return NumericID(uint32(n))
	}
	return NamedID(s)
}

// Numeric returns the numeric id and true, or 0 and false for a name.
func (id Identifier) Numeric() (uint32, bool) { return id.num, id.kind == 1 }

// Name returns the name, or "" for a numeric id.
func (id Identifier) Name() string { return id.name }

// IsZero reports whether id was never set.
func (id Identifier) IsZero() bool { return id.kind == 0 }

func (id Identifier) String() string {
	if id.kind == 1 {
		return strconv.FormatUint(uint64(id.num), 10)
	}
	return strconv.Quote(id.name)
}

// Validate reports whether id can be encoded.
func (id Identifier) Validate() error {
	switch id.kind {
	case 1:
		return nil
	case 2:
		if len(id.name) == 0 || len(id.name) > 255 || !utf8.ValidString(id.name) {
			return fmt.Errorf("%w: name %q must be 1..255 bytes of UTF-8", ErrInvalidIdentifier, id.name)
		}
		return nil
	}
	return fmt.Errorf("%w: identifier is not set", ErrInvalidIdentifier)
}

// AppendTo appends [kind u8][len u8][value].
func (id Identifier) AppendTo(b []byte) []byte {
	if id.kind == 1 {
		b = append(b, 1, 4)
		return appendU32(b, id.num)
	}
	b = append(b, 2)
	return appendString8(b, id.name)
}

// Identifier reads an identifier: numeric ids must have length 4, names
// 1..255 bytes of UTF-8.
func (d *Decoder) Identifier(field string) Identifier {
	kind := d.U8(field + " kind")
	n := int(d.U8(field + " length"))
	if d.Err() != nil {
		return Identifier{}
	}
	switch kind {
	case 1:
		if n != 4 {
			d.Failf("%s: numeric identifier has length %d, want 4", field, n)
			return Identifier{}
		}
		return NumericID(d.U32(field))
	case 2:
		if n == 0 {
			d.Failf("%s: name is empty", field)
			return Identifier{}
		}
		return NamedID(d.utf8(n, field))
	}
	d.Failf("%s: identifier kind %d, want 1 or 2", field, kind)
	return Identifier{}
}

// ConsumerKind tells a single consumer from a consumer group.
type ConsumerKind uint8

// Consumer kinds.
const (
	ConsumerSingle ConsumerKind = 1
	ConsumerGroup  ConsumerKind = 2
)

// Consumer is who polls or owns an offset: a single consumer or a group.
type Consumer struct {
	Kind ConsumerKind
	ID   Identifier
}

// AppendTo appends [kind u8][Identifier].
func (c Consumer) AppendTo(b []byte) []byte {
	return c.ID.AppendTo(append(b, byte(c.Kind)))
}

// Consumer reads a consumer; a kind other than 1 or 2 is an error.
func (d *Decoder) Consumer(field string) Consumer {
	k := ConsumerKind(d.U8(field + " kind"))
	if d.Err() == nil && k != ConsumerSingle && k != ConsumerGroup {
		d.Failf("%s: consumer kind %d, want 1 or 2", field, k)
	}
	return Consumer{Kind: k, ID: d.Identifier(field + " id")}
}

// PartitioningKind says how a send picks its partition.
type PartitioningKind uint8

// Partitioning kinds.
const (
	PartitionBalanced     PartitioningKind = 1
	PartitionByID         PartitioningKind = 2
	PartitionByMessageKey PartitioningKind = 3
)

// Partitioning picks the partition of a send.
type Partitioning struct {
	Kind        PartitioningKind
	PartitionID uint32 // for PartitionByID
	Key         []byte // for PartitionByMessageKey: 1..255 bytes
}

// Balanced spreads sends round-robin over the partitions.
func Balanced() Partitioning { return Partitioning{Kind: PartitionBalanced} }

// ToPartition sends to one partition.
func ToPartition(id uint32) Partitioning {
	return Partitioning{Kind: PartitionByID, PartitionID: id}
}

// ByKey sends to XXH32(key) % partitions_count.
func ByKey(key []byte) Partitioning { return Partitioning{Kind: PartitionByMessageKey, Key: key} }

// Validate reports whether p can be encoded.
func (p Partitioning) Validate() error {
	switch p.Kind {
	case PartitionBalanced, PartitionByID:
		return nil
	case PartitionByMessageKey:
		if len(p.Key) == 0 || len(p.Key) > 255 {
			return fmt.Errorf("%w: partitioning key is %d bytes, want 1..255", ErrInvalidKeyValueLength, len(p.Key))
		}
		return nil
	}
	return fmt.Errorf("%w: partitioning kind %d", ErrInvalidCommand, p.Kind)
}

// AppendTo appends [kind u8][len u8][value].
func (p Partitioning) AppendTo(b []byte) []byte {
	switch p.Kind {
	case PartitionByID:
		b = append(b, byte(p.Kind), 4)
		return appendU32(b, p.PartitionID)
	case PartitionByMessageKey:
		b = append(b, byte(p.Kind), byte(len(p.Key)))
		return append(b, p.Key...)
	}
	return append(b, byte(PartitionBalanced), 0)
}

// Partitioning reads a partitioning with the lengths each kind requires.
func (d *Decoder) Partitioning(field string) Partitioning {
	kind := PartitioningKind(d.U8(field + " kind"))
	n := int(d.U8(field + " length"))
	if d.Err() != nil {
		return Partitioning{}
	}
	switch kind {
	case PartitionBalanced:
		if n != 0 {
			d.Failf("%s: balanced partitioning has length %d, want 0", field, n)
		}
		return Balanced()
	case PartitionByID:
		if n != 4 {
			d.Failf("%s: partition id has length %d, want 4", field, n)
			return Partitioning{}
		}
		return ToPartition(d.U32(field))
	case PartitionByMessageKey:
		if n == 0 {
			d.Failf("%s: message key is empty", field)
			return Partitioning{}
		}
		return ByKey(d.Bytes(n, field))
	}
	d.Failf("%s: partitioning kind %d, want 1..3", field, kind)
	return Partitioning{}
}

// PollingKind says where a poll starts.
type PollingKind uint8

// Polling strategies.
const (
	PollOffset    PollingKind = 1
	PollTimestamp PollingKind = 2
	PollFirst     PollingKind = 3
	PollLast      PollingKind = 4
	PollNext      PollingKind = 5
)

func (k PollingKind) String() string {
	switch k {
	case PollOffset:
		return "offset"
	case PollTimestamp:
		return "timestamp"
	case PollFirst:
		return "first"
	case PollLast:
		return "last"
	case PollNext:
		return "next"
	}
	return fmt.Sprintf("polling kind %d", uint8(k))
}

// PollingStrategy is [kind u8][value u64]; the value is ignored for first,
// last and next.
type PollingStrategy struct {
	Kind  PollingKind
	Value uint64
}

// AtOffset polls from an offset.
func AtOffset(o uint64) PollingStrategy { return PollingStrategy{PollOffset, o} }

// AtTimestamp polls messages appended at or after a time in µs since the epoch.
func AtTimestamp(us uint64) PollingStrategy { return PollingStrategy{PollTimestamp, us} }

// First polls from the first message.
func First() PollingStrategy { return PollingStrategy{Kind: PollFirst} }

// Last polls the last count messages.
func Last() PollingStrategy { return PollingStrategy{Kind: PollLast} }

// Next polls after the consumer's stored offset.
func Next() PollingStrategy { return PollingStrategy{Kind: PollNext} }

// AppendTo appends the 9-byte strategy.
func (s PollingStrategy) AppendTo(b []byte) []byte {
	return appendU64(append(b, byte(s.Kind)), s.Value)
}

// PollingStrategy reads a strategy; kinds outside 1..5 are an error.
func (d *Decoder) PollingStrategy(field string) PollingStrategy {
	k := PollingKind(d.U8(field + " kind"))
	v := d.U64(field + " value")
	if d.Err() == nil && (k < PollOffset || k > PollNext) {
		d.Failf("%s: polling kind %d, want 1..5", field, k)
	}
	return PollingStrategy{k, v}
}

// OptPartition is the optional partition id: [flag u8][id u32], always 5 bytes.
type OptPartition struct {
	Set bool
	ID  uint32
}

// Partition returns a set OptPartition.
func Partition(id uint32) OptPartition { return OptPartition{Set: true, ID: id} }

// AppendTo appends the 5 bytes; an absent partition is five zero bytes.
func (p OptPartition) AppendTo(b []byte) []byte {
	if !p.Set {
		return append(b, 0, 0, 0, 0, 0)
	}
	return appendU32(append(b, 1), p.ID)
}

// OptPartition reads the 5 bytes. Any flag other than 1 means absent.
func (d *Decoder) OptPartition(field string) OptPartition {
	flag := d.U8(field + " flag")
	id := d.U32(field)
	if flag != 1 {
		return OptPartition{}
	}
	return OptPartition{Set: true, ID: id}
}

// AckLevel is how far a partition write is confirmed before the reply.
type AckLevel uint8

// Ack levels. The typed clients always send AckQuorum.
const (
	AckNone   AckLevel = 0
	AckQuorum AckLevel = 1
)

// AckLevel reads an ack byte; values above 1 are an error.
func (d *Decoder) AckLevel(field string) AckLevel {
	v := d.U8(field)
	if v > 1 {
		d.Failf("%s: ack level %d, want 0 or 1", field, v)
	}
	return AckLevel(v)
}
