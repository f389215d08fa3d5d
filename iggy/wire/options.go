package wire

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/units"
)

// Topic option keys.
const (
	OptCompression                  = "compression_algorithm"
	OptMessageExpiry                = "message_expiry"
	OptMaxTopicSize                 = "max_topic_size"
	OptSegmentSize                  = "segment_size"
	OptEnforceFsync                 = "enforce_fsync"
	OptMessagesRequiredToSave       = "messages_required_to_save"
	OptSizeOfMessagesRequiredToSave = "size_of_messages_required_to_save"
	OptPreallocateSegments          = "preallocate_segments"

	// Ferry's extensions: compacted topics (a Ferry broker only). They
	// are not in TopicOptionCatalog and appear in a topic's options only
	// when set, so upstream clients never meet them unless they set them.
	OptCompact = "ferry.compact"
	// OptCompactTombstoneRetention is how long a deletion marker is kept
	// after it was appended, in µs (or a duration string); 0 = the
	// broker's default.
	OptCompactTombstoneRetention = "ferry.compact_tombstone_retention"
)

// Limits of an options block.
const (
	MaxOptionEntries = 1024
	MaxOptionsSize   = 100_000
)

// Compression codes of the topic header's compression byte.
const (
	CompressionNone uint8 = 1
	CompressionGzip uint8 = 2
)

// CompressionName returns "none" or "gzip" for a compression code.
func CompressionName(c uint8) string {
	if c == CompressionGzip {
		return "gzip"
	}
	return "none"
}

// OptionDescriptor is one entry of describe_options (code 13).
type OptionDescriptor struct {
	Key         string
	Kind        ValueKind
	Default     []byte
	Description string
}

// TopicOptionCatalog is the topic scope of describe_options, in the order
// the upstream server lists it.
var TopicOptionCatalog = []OptionDescriptor{
	{OptCompression, KindString, []byte("none"), "Compression of stored messages: \"none\" or \"gzip\"."},
	{OptMessageExpiry, KindUint64, appendU64(nil, Unlimited), "How long messages are kept, in microseconds; u64::MAX keeps them forever."},
	{OptMaxTopicSize, KindUint64, appendU64(nil, Unlimited), "Largest size of the topic in bytes before old segments are removed; u64::MAX is unlimited."},
	{OptSegmentSize, KindUint64, appendU64(nil, 1<<30), "Size of one segment file in bytes: a multiple of 512 from 1 MiB to 1 GiB."},
	{OptEnforceFsync, KindBool, []byte{0}, "Fsync every write of this topic before acknowledging it."},
	{OptMessagesRequiredToSave, KindUint32, appendU32(nil, 1024), "Messages buffered before they are written to disk."},
	{OptSizeOfMessagesRequiredToSave, KindUint64, appendU64(nil, 1<<20), "Bytes buffered before they are written to disk."},
	{OptPreallocateSegments, KindBool, []byte{0}, "Preallocate segment files at their full size."},
}

// DescribeOptionsReply is the reply payload of describe_options.
type DescribeOptionsReply struct{ Options []OptionDescriptor }

// AppendTo implements Encodable.
func (r *DescribeOptionsReply) AppendTo(b []byte) []byte {
	b = appendU32(b, uint32(len(r.Options)))
	for _, o := range r.Options {
		b = appendString8(b, o.Key)
		b = append(b, byte(o.Kind))
		b = appendU32(b, uint32(len(o.Default)))
		b = append(b, o.Default...)
		b = appendString32(b, o.Description)
	}
	return b
}

// DecodeFrom implements Decodable.
func (r *DescribeOptionsReply) DecodeFrom(d *Decoder) {
	n := d.U32("options count")
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		var o OptionDescriptor
		o.Key = d.Name("option key")
		o.Kind = ValueKind(d.U8("option kind"))
		dl := d.U32("option default length")
		if uint64(dl) > uint64(d.Remaining()) {
			d.Failf("option default length %d exceeds the %d bytes left", dl, d.Remaining())
		}
		o.Default = d.Bytes(int(dl), "option default")
		o.Description = d.String32("option description")
		r.Options = append(r.Options, o)
	}
}

// ParseOptionsBlock checks the structural rules of an options block: the
// TLV shape, string keys, unique keys, at most MaxOptionEntries entries and
// MaxOptionsSize bytes. Broken TLV is ErrInvalidCommand (status 3), limits
// are ErrOptionsBlockTooLarge.
func ParseOptionsBlock(b []byte) ([]Entry, error) {
	if len(b) > MaxOptionsSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrOptionsBlockTooLarge, len(b), MaxOptionsSize)
	}
	entries, err := ParseTLV(b)
	if err != nil {
		return nil, fmt.Errorf("%w: options block: %v", ErrInvalidCommand, err)
	}
	if len(entries) > MaxOptionEntries {
		return nil, fmt.Errorf("%w: %d entries, limit %d", ErrOptionsBlockTooLarge, len(entries), MaxOptionEntries)
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Key.Kind != KindString {
			return nil, fmt.Errorf("%w: option key of kind %s, want string", ErrInvalidCommand, e.Key.Kind)
		}
		k := string(e.Key.Data)
		if seen[k] {
			return nil, fmt.Errorf("%w: option %q given twice", ErrInvalidCommand, k)
		}
		seen[k] = true
	}
	return entries, nil
}

// AppendOptionsReply appends a response options block: [len u32][TLV].
func AppendOptionsReply(b []byte, entries []Entry) []byte {
	at := len(b)
	b = appendU32(b, 0)
	b = AppendTLV(b, entries)
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// OptionsReply reads a response options block.
func (d *Decoder) OptionsReply(field string) []Entry {
	n := d.U32(field + " length")
	if uint64(n) > uint64(d.Remaining()) {
		d.Failf("%s length %d exceeds the %d bytes left", field, n, d.Remaining())
		return nil
	}
	raw := d.Bytes(int(n), field)
	if d.Err() != nil {
		return nil
	}
	entries, err := ParseTLV(raw)
	if err != nil {
		d.Fail(fmt.Errorf("%s: %w", field, err))
	}
	return entries
}

// TopicOptions are a topic's resolved settings.
type TopicOptions struct {
	Compression                  uint8 // CompressionNone or CompressionGzip
	MessageExpiry                uint64
	MaxTopicSize                 uint64
	SegmentSize                  uint64
	EnforceFsync                 bool
	MessagesRequiredToSave       uint32
	SizeOfMessagesRequiredToSave uint64
	PreallocateSegments          bool
	// Compact (OptCompact) makes the topic compacted: sealed segments keep
	// the latest message per key.
	Compact bool `json:",omitempty"`
	// CompactTombstoneRetention (OptCompactTombstoneRetention), µs; 0 =
	// the broker's default.
	CompactTombstoneRetention uint64 `json:",omitempty"`
	// Explicit lists the keys the creator set (non-default), in key order.
	Explicit []string
}

// DefaultTopicOptions returns the catalog defaults.
func DefaultTopicOptions() TopicOptions {
	return TopicOptions{
		Compression: CompressionNone, MessageExpiry: Unlimited, MaxTopicSize: Unlimited,
		SegmentSize: 1 << 30, MessagesRequiredToSave: 1024, SizeOfMessagesRequiredToSave: 1 << 20,
	}
}

// TopicOption builds a client-side option entry.
func TopicOption(key string, v Value) Entry { return header.New(key, v) }

func optErr(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidOptionValue, key, fmt.Sprintf(format, args...))
}

// ResolveTopicOptions applies a create_topic or update_topic options block
// on top of base, the way the server does: known keys only (4041), each
// value of its canonical kind or a string form (4042), zero sentinels left
// to the default, and max_topic_size at least the segment size (1019).
// update limits the keys to those update_topic accepts.
func ResolveTopicOptions(base TopicOptions, entries []Entry, partitions uint32, update bool) (TopicOptions, error) {
	o := base
	explicit := map[string]bool{}
	for _, k := range base.Explicit {
		explicit[k] = true
	}
	for _, e := range entries {
		key := string(e.Key.Data)
		set, err := o.apply(key, e.Value, update)
		if err != nil {
			return base, err
		}
		explicit[key] = set
	}
	if o.PreallocateSegments && o.SegmentSize*uint64(partitions) > 64<<30 {
		return base, optErr(OptPreallocateSegments, "segment_size × partitions exceeds 64 GiB")
	}
	if o.MaxTopicSize != Unlimited && o.MaxTopicSize < o.SegmentSize {
		return base, fmt.Errorf("%w: max_topic_size %d is below segment_size %d", ErrInvalidTopicSize, o.MaxTopicSize, o.SegmentSize)
	}
	o.Explicit = o.Explicit[:0:0]
	for k, set := range explicit {
		if set {
			o.Explicit = append(o.Explicit, k)
		}
	}
	sort.Strings(o.Explicit)
	return o, nil
}

// apply sets one option and reports whether it stays explicit (false for
// zero sentinels that mean "default").
func (o *TopicOptions) apply(key string, v Value, update bool) (bool, error) {
	switch key {
	case OptCompact:
		b, err := boolValue(key, v)
		if err != nil {
			return false, err
		}
		o.Compact = b
		return b, nil
	case OptCompactTombstoneRetention:
		n, err := u64Value(key, v, units.ParseExpiry)
		if err != nil {
			return false, err
		}
		if n == Unlimited {
			return false, optErr(key, "deletion markers cannot be kept forever on a compacted topic")
		}
		o.CompactTombstoneRetention = n
		return n != 0, nil
	}
	if update && key != OptCompression && key != OptMessageExpiry && key != OptMaxTopicSize {
		return false, fmt.Errorf("%w: %s cannot be updated", ErrUnsupportedOptionKey, key)
	}
	def := DefaultTopicOptions()
	switch key {
	case OptCompression:
		c, err := compressionValue(v)
		if err != nil {
			return false, err
		}
		o.Compression = c
		return true, nil
	case OptMessageExpiry:
		n, err := u64Value(key, v, units.ParseExpiry)
		if err != nil {
			return false, err
		}
		if n == 0 {
			o.MessageExpiry = def.MessageExpiry
			return false, nil
		}
		o.MessageExpiry = n
		return true, nil
	case OptMaxTopicSize:
		n, err := u64Value(key, v, units.ParseSize)
		if err != nil {
			return false, err
		}
		if n == 0 {
			o.MaxTopicSize = def.MaxTopicSize
			return false, nil
		}
		o.MaxTopicSize = n
		return true, nil
	case OptSegmentSize:
		n, err := u64Value(key, v, units.ParseSize)
		if err != nil {
			return false, err
		}
		if n == 0 {
			o.SegmentSize = def.SegmentSize
			return false, nil
		}
		if n%512 != 0 || n < 1<<20 || n > 1<<30 {
			return false, optErr(key, "%d is not a multiple of 512 between 1 MiB and 1 GiB", n)
		}
		o.SegmentSize = n
		return true, nil
	case OptEnforceFsync, OptPreallocateSegments:
		b, err := boolValue(key, v)
		if err != nil {
			return false, err
		}
		if key == OptEnforceFsync {
			o.EnforceFsync = b
		} else {
			o.PreallocateSegments = b
		}
		return true, nil
	case OptMessagesRequiredToSave:
		var n uint64
		switch {
		case v.Kind == KindUint32 && len(v.Data) == 4:
			n = uint64(binary.LittleEndian.Uint32(v.Data))
		case v.Kind == KindString:
			var err error
			if n, err = strconv.ParseUint(strings.TrimSpace(string(v.Data)), 10, 32); err != nil {
				return false, optErr(key, "%q is not a number", v.Data)
			}
		default:
			return false, optErr(key, "want uint32 or a numeric string, got %s", v.Kind)
		}
		if n == 0 || n > 16_777_216 {
			return false, optErr(key, "%d is outside 1..16777216", n)
		}
		o.MessagesRequiredToSave = uint32(n)
		return true, nil
	case OptSizeOfMessagesRequiredToSave:
		n, err := u64Value(key, v, units.ParseSize)
		if err != nil {
			return false, err
		}
		if n == 0 {
			o.SizeOfMessagesRequiredToSave = def.SizeOfMessagesRequiredToSave
			return false, nil
		}
		if n > 1<<30 {
			return false, optErr(key, "%d exceeds 1 GiB", n)
		}
		o.SizeOfMessagesRequiredToSave = n
		return true, nil
	}
	return false, fmt.Errorf("%w: %q", ErrUnsupportedOptionKey, key)
}

func compressionValue(v Value) (uint8, error) {
	switch {
	case v.Kind == KindString:
		switch strings.ToLower(string(v.Data)) {
		case "none":
			return CompressionNone, nil
		case "gzip":
			return CompressionGzip, nil
		}
	case v.Kind == KindUint8 && len(v.Data) == 1 && (v.Data[0] == 1 || v.Data[0] == 2):
		return v.Data[0], nil
	}
	return 0, optErr(OptCompression, "%s %q, want \"none\" or \"gzip\"", v.Kind, v.String())
}

func u64Value(key string, v Value, parse func(string) (uint64, error)) (uint64, error) {
	switch {
	case v.Kind == KindUint64 && len(v.Data) == 8:
		return binary.LittleEndian.Uint64(v.Data), nil
	case v.Kind == KindString:
		n, err := parse(string(v.Data))
		if err != nil {
			return 0, optErr(key, "%v", err)
		}
		return n, nil
	}
	return 0, optErr(key, "want uint64 or a string, got %s", v.Kind)
}

func boolValue(key string, v Value) (bool, error) {
	switch {
	case v.Kind == KindBool && len(v.Data) == 1 && v.Data[0] <= 1:
		return v.Data[0] == 1, nil
	case v.Kind == KindString && (string(v.Data) == "true" || string(v.Data) == "false"):
		return string(v.Data) == "true", nil
	}
	return false, optErr(key, "want bool [0] or [1], or \"true\"/\"false\"")
}

// value returns the canonical encoding of one option.
func (o *TopicOptions) value(key string) Value {
	switch key {
	case OptCompression:
		return StringValue(CompressionName(o.Compression))
	case OptMessageExpiry:
		return Uint64Value(o.MessageExpiry)
	case OptMaxTopicSize:
		return Uint64Value(o.MaxTopicSize)
	case OptSegmentSize:
		return Uint64Value(o.SegmentSize)
	case OptEnforceFsync:
		return BoolValue(o.EnforceFsync)
	case OptMessagesRequiredToSave:
		return Uint32Value(o.MessagesRequiredToSave)
	case OptSizeOfMessagesRequiredToSave:
		return Uint64Value(o.SizeOfMessagesRequiredToSave)
	case OptPreallocateSegments:
		return BoolValue(o.PreallocateSegments)
	case OptCompact:
		return BoolValue(o.Compact)
	case OptCompactTombstoneRetention:
		return Uint64Value(o.CompactTombstoneRetention)
	}
	return Value{}
}

// Blocks returns the explicit and derived option blocks, each in key order;
// together they cover every catalog key exactly once.
func (o *TopicOptions) Blocks() (explicit, derived []Entry) {
	isExplicit := map[string]bool{}
	for _, k := range o.Explicit {
		isExplicit[k] = true
	}
	keys := make([]string, 0, len(TopicOptionCatalog))
	for _, c := range TopicOptionCatalog {
		keys = append(keys, c.Key)
	}
	for _, k := range []string{OptCompact, OptCompactTombstoneRetention} {
		if isExplicit[k] {
			keys = append(keys, k) // extensions: only when set
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := TopicOption(k, o.value(k))
		if isExplicit[k] {
			explicit = append(explicit, e)
		} else {
			derived = append(derived, e)
		}
	}
	return explicit, derived
}
