package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ferryhq/ferry/iggy"
)

// Suffix ends the name of every dead-letter topic the runtime makes by
// default (<key>_dead_letter, config.DefaultDeadLetterTopic); [Topics]
// lists the topics whose name ends with it.
const Suffix = "_dead_letter"

// ReplayConsumer is the consumer whose offsets on a dead-letter topic say
// how far [Replay] got.
const ReplayConsumer = "ferry-dlq-replay"

// HeaderReplayOf is set on a replayed sink dead letter: the id (UUID text)
// of the message it is a copy of.
const HeaderReplayOf = "ferry.replay.of"

// Topic is one dead-letter topic: how many letters it holds and how many
// of them replay went past, over its partitions.
type Topic struct {
	Stream   string `json:"stream"`
	Topic    string `json:"topic"`
	Messages uint64 `json:"messages"`
	Replayed uint64 `json:"replayed"`
	// Partitions are the same figures per partition.
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition of a dead-letter topic.
type Partition struct {
	Partition uint32 `json:"partition"`
	Messages  uint64 `json:"messages"`
	// NextOffset is the offset the next letter will get (0 when empty).
	NextOffset uint64 `json:"next_offset"`
	// ReplayFrom is where the next replay without From starts: the letters
	// below it were replayed (or passed over by a replay From further on).
	ReplayFrom uint64 `json:"replay_from"`
}

// Topics lists the dead-letter topics (names ending in [Suffix]) of
// stream, or of every stream when stream is "", in the server's order.
func Topics(ctx context.Context, cl *iggy.Client, stream string) ([]Topic, error) {
	streams, err := cl.ListStreams(ctx)
	if err != nil {
		return nil, fmt.Errorf("dlq: list streams: %w", err)
	}
	var out []Topic
	for _, s := range streams {
		if stream != "" && s.Name != stream {
			continue
		}
		topics, err := cl.ListTopics(ctx, iggy.NamedID(s.Name))
		if err != nil {
			return nil, fmt.Errorf("dlq: list the topics of stream %q: %w", s.Name, err)
		}
		for _, t := range topics {
			if !strings.HasSuffix(t.Name, Suffix) {
				continue
			}
			st, err := Stat(ctx, cl, s.Name, t.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// Stat counts the letters of one dead-letter topic, whatever its name.
// The error matches iggy.ErrStreamNotFound or iggy.ErrTopicNotFound when
// the topic does not exist.
func Stat(ctx context.Context, cl *iggy.Client, stream, topic string) (Topic, error) {
	t, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	if err != nil {
		return Topic{}, fmt.Errorf("dlq: topic %s/%s: %w", stream, topic, err)
	}
	out := Topic{Stream: stream, Topic: topic, Partitions: make([]Partition, 0, len(t.Partitions))}
	for _, p := range t.Partitions {
		from, err := replayStart(ctx, cl, stream, topic, p.ID)
		if err != nil {
			return Topic{}, err
		}
		next := uint64(0)
		if p.MessagesCount > 0 {
			next = p.CurrentOffset + 1
		}
		out.Messages += p.MessagesCount
		out.Replayed += min(from, next)
		out.Partitions = append(out.Partitions, Partition{Partition: p.ID, Messages: p.MessagesCount, NextOffset: next, ReplayFrom: from})
	}
	return out, nil
}

// replayStart is the offset after the last message replay sent from a
// partition (0 when it sent none).
func replayStart(ctx context.Context, cl *iggy.Client, stream, topic string, partition uint32) (uint64, error) {
	off, err := cl.GetConsumerOffset(ctx, iggy.SingleConsumer(iggy.NamedID(ReplayConsumer)),
		iggy.NamedID(stream), iggy.NamedID(topic), iggy.Partition(partition))
	if errors.Is(err, iggy.ErrConsumerOffsetNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dlq: the replay offset of %s/%s partition %d: %w", stream, topic, partition, err)
	}
	return off.StoredOffset + 1, nil
}

// IsNotFound reports whether err says a stream or topic does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, iggy.ErrStreamNotFound) || errors.Is(err, iggy.ErrTopicNotFound) ||
		errors.Is(err, iggy.ErrResourceNotFound)
}
