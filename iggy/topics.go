package iggy

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// TopicOption is one setting of CreateTopic or UpdateTopic, sent in the
// topic's options block. A key given twice keeps its last value. Options
// left out take the server's defaults (see DescribeOptions).
type TopicOption struct{ entry Entry }

// Compression is a topic's message compression.
type Compression uint8

// Compressions.
const (
	CompressionNone = Compression(wire.CompressionNone)
	CompressionGzip = Compression(wire.CompressionGzip)
)

// TopicCompression sets the stored-message compression. Default none.
// Updatable.
func TopicCompression(c Compression) TopicOption {
	return TopicOption{wire.TopicOption(wire.OptCompression, StringValue(wire.CompressionName(uint8(c))))}
}

// TopicMessageExpiry sets how long messages are kept; d <= 0 keeps them
// for ever (the default). Updatable.
func TopicMessageExpiry(d time.Duration) TopicOption {
	us := uint64(wire.Unlimited)
	if d > 0 {
		us = uint64(max(d/time.Microsecond, 1))
	}
	return TopicOption{wire.TopicOption(wire.OptMessageExpiry, Uint64Value(us))}
}

// TopicMaxSize sets the topic's size limit in bytes; 0 or wire.Unlimited
// means no limit (the default). It must be at least the segment size.
// Updatable.
func TopicMaxSize(bytes uint64) TopicOption {
	if bytes == 0 {
		bytes = wire.Unlimited
	}
	return TopicOption{wire.TopicOption(wire.OptMaxTopicSize, Uint64Value(bytes))}
}

// TopicSegmentSize sets the segment size in bytes: a multiple of 512 from
// 1 MiB to 1 GiB. Default 1 GiB.
func TopicSegmentSize(bytes uint64) TopicOption {
	return TopicOption{wire.TopicOption(wire.OptSegmentSize, Uint64Value(bytes))}
}

// TopicEnforceFsync makes the server fsync every write before it
// acknowledges it. Default false.
func TopicEnforceFsync(on bool) TopicOption {
	return TopicOption{wire.TopicOption(wire.OptEnforceFsync, BoolValue(on))}
}

// TopicCompact makes a topic compacted (a Ferry broker's extension,
// wire.OptCompact): its sealed segments keep only the latest message per
// key (the KeyHeader), deletion markers (DeletedHeader) for
// TopicCompactTombstoneRetention, and messages without a key. An upstream
// server refuses the option.
func TopicCompact(on bool) TopicOption {
	return TopicOption{wire.TopicOption(wire.OptCompact, BoolValue(on))}
}

// TopicCompactTombstoneRetention sets how long a compacted topic keeps a
// deletion marker after it was appended (wire.OptCompactTombstoneRetention);
// 0 leaves it to the broker's default.
func TopicCompactTombstoneRetention(d time.Duration) TopicOption {
	return TopicOption{wire.TopicOption(wire.OptCompactTombstoneRetention, Uint64Value(uint64(max(d.Microseconds(), 0))))}
}

// TopicRawOption sets any option by key, for keys this package has no
// helper for (e.g. "messages_required_to_save" as Uint32Value(7)).
func TopicRawOption(key string, v Value) TopicOption {
	return TopicOption{wire.TopicOption(key, v)}
}

// encodeTopicOptions builds the options block, last value per key winning.
func encodeTopicOptions(cmd wire.Command, opts []TopicOption) ([]byte, error) {
	entries := make([]Entry, 0, len(opts))
	index := map[string]int{}
	for _, o := range opts {
		key := string(o.entry.Key.Data)
		if err := wire.CheckValue(wire.Value(o.entry.Key)); err != nil {
			return nil, fmt.Errorf("iggy: %s: option key: %w", cmd, err)
		}
		if err := wire.CheckValue(o.entry.Value); err != nil {
			return nil, fmt.Errorf("iggy: %s: option %s: %w", cmd, key, err)
		}
		if i, ok := index[key]; ok {
			entries[i] = o.entry
			continue
		}
		index[key] = len(entries)
		entries = append(entries, o.entry)
	}
	b := wire.AppendTLV(nil, entries)
	if len(b) > wire.MaxOptionsSize {
		return nil, fmt.Errorf("iggy: %s: options block is %d bytes, limit %d: %w", cmd, len(b), wire.MaxOptionsSize, wire.ErrOptionsBlockTooLarge)
	}
	return b, nil
}

// CreateTopic creates a topic with partitions partitions (0..1000) and
// returns it. The server picks the lowest free id.
func (c *Client) CreateTopic(ctx context.Context, stream Identifier, name string, partitions uint32, opts ...TopicOption) (*TopicDetails, error) {
	const cmd = wire.CmdCreateTopic
	if err := checkIDs(cmd, stream); err != nil {
		return nil, err
	}
	if err := checkName(cmd, "topic", name); err != nil {
		return nil, err
	}
	block, err := encodeTopicOptions(cmd, opts)
	if err != nil {
		return nil, err
	}
	return fetch[TopicDetails](ctx, c, cmd, &wire.CreateTopic{Stream: stream, PartitionsCount: partitions, Name: name, Options: block}, 0)
}

// GetTopic returns a topic with its partitions; a missing topic (or
// stream) is ErrTopicNotFound.
func (c *Client) GetTopic(ctx context.Context, stream, topic Identifier) (*TopicDetails, error) {
	if err := checkIDs(wire.CmdGetTopic, stream, topic); err != nil {
		return nil, err
	}
	return fetch[TopicDetails](ctx, c, wire.CmdGetTopic, &wire.TopicRef{Stream: stream, Topic: topic}, wire.ErrTopicIDNotFound.Code)
}

// ListTopics returns the topics of a stream; a missing stream has none.
func (c *Client) ListTopics(ctx context.Context, stream Identifier) ([]TopicHeader, error) {
	if err := checkIDs(wire.CmdGetTopics, stream); err != nil {
		return nil, err
	}
	l, err := fetch[wire.TopicList](ctx, c, wire.CmdGetTopics, &wire.StreamRef{Stream: stream}, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// UpdateTopic renames a topic and changes the options the server lets an
// update change: TopicCompression, TopicMessageExpiry and TopicMaxSize.
func (c *Client) UpdateTopic(ctx context.Context, stream, topic Identifier, name string, opts ...TopicOption) error {
	const cmd = wire.CmdUpdateTopic
	if err := checkIDs(cmd, stream, topic); err != nil {
		return err
	}
	if err := checkName(cmd, "topic", name); err != nil {
		return err
	}
	block, err := encodeTopicOptions(cmd, opts)
	if err != nil {
		return err
	}
	_, err = c.call(ctx, cmd, &wire.UpdateTopic{Stream: stream, Topic: topic, Name: name, Options: block})
	return err
}

// DeleteTopic deletes a topic with its messages.
func (c *Client) DeleteTopic(ctx context.Context, stream, topic Identifier) error {
	if err := checkIDs(wire.CmdDeleteTopic, stream, topic); err != nil {
		return err
	}
	defer c.parts.invalidate()
	_, err := c.call(ctx, wire.CmdDeleteTopic, &wire.TopicRef{Stream: stream, Topic: topic})
	return err
}

// PurgeTopic deletes every message of a topic.
func (c *Client) PurgeTopic(ctx context.Context, stream, topic Identifier) error {
	if err := checkIDs(wire.CmdPurgeTopic, stream, topic); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdPurgeTopic, &wire.TopicRef{Stream: stream, Topic: topic})
	return err
}

// CreatePartitions adds count (1..1000) partitions after the highest one.
func (c *Client) CreatePartitions(ctx context.Context, stream, topic Identifier, count uint32) error {
	return c.changePartitions(ctx, wire.CmdCreatePartitions, stream, topic, count)
}

// DeletePartitions removes the count (1..1000) highest-numbered partitions.
func (c *Client) DeletePartitions(ctx context.Context, stream, topic Identifier, count uint32) error {
	return c.changePartitions(ctx, wire.CmdDeletePartitions, stream, topic, count)
}

func (c *Client) changePartitions(ctx context.Context, cmd wire.Command, stream, topic Identifier, count uint32) error {
	if err := checkIDs(cmd, stream, topic); err != nil {
		return err
	}
	defer c.parts.invalidate()
	_, err := c.call(ctx, cmd, &wire.PartitionsChange{Stream: stream, Topic: topic, Count: count})
	return err
}

// DeleteSegments deletes the count oldest segments of a partition.
func (c *Client) DeleteSegments(ctx context.Context, stream, topic Identifier, partition, count uint32) error {
	if err := checkIDs(wire.CmdDeleteSegments, stream, topic); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdDeleteSegments, &wire.DeleteSegments{Stream: stream, Topic: topic, Partition: partition, Count: count})
	return err
}
