package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/backoff"
)

// findTopic reads the topic, looking again (cfg.initRetries times,
// cfg.initInterval apart) while the stream or topic does not exist yet.
// Streams and topics are the user's: this package never creates them.
func findTopic(ctx context.Context, c *iggy.Client, stream, topic iggy.Identifier, cfg *pollConfig) (*iggy.TopicDetails, error) {
	for attempt := 0; ; attempt++ {
		td, err := c.GetTopic(ctx, stream, topic)
		if err == nil {
			return td, nil
		}
		missing := errors.Is(err, iggy.ErrTopicNotFound) || errors.Is(err, iggy.ErrStreamNotFound)
		if !missing || attempt >= cfg.initRetries {
			switch {
			case missing && cfg.initRetries > 0:
				return nil, fmt.Errorf("live: topic %s/%s still missing after %d retries (the library never creates streams or topics): %w",
					stream, topic, cfg.initRetries, err)
			case missing:
				return nil, fmt.Errorf("live: topic %s/%s (the library never creates streams or topics; see WithInitRetries): %w",
					stream, topic, err)
			}
			return nil, fmt.Errorf("live: topic %s/%s: %w", stream, topic, err)
		}
		cfg.logger.Warn("live: stream or topic does not exist yet; looking again",
			"stream", stream.String(), "topic", topic.String(), "retry", attempt+1, "of", cfg.initRetries, "in", cfg.initInterval)
		if err := sleep(ctx, nil, cfg.initInterval); err != nil {
			return nil, fmt.Errorf("live: waiting for topic %s/%s: %w", stream, topic, err)
		}
	}
}

// partitionEnd returns the offset after a partition's last message when it
// was read, or 0 when it holds no messages.
func partitionEnd(p *iggy.PartitionInfo) uint64 {
	if p.MessagesCount == 0 {
		return 0
	}
	return p.CurrentOffset + 1
}

// findPartition returns partition id of td.
func findPartition(td *iggy.TopicDetails, id uint32) (*iggy.PartitionInfo, error) {
	for i := range td.Partitions {
		if td.Partitions[i].ID == id {
			return &td.Partitions[i], nil
		}
	}
	return nil, fmt.Errorf("live: topic %s has no partition %d (it has %d): %w",
		td.Name, id, td.PartitionsCount, iggy.ErrPartitionNotFound)
}

// sleep waits d, or until ctx ends or stop is closed (stop may be nil).
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	return backoff.SleepOr(ctx, d, stop, iggy.ErrClosed)
}

// retryOrFail handles a failed poll: with no retry interval it returns
// err; otherwise it logs, waits the retry interval and returns nil.
func retryOrFail(ctx context.Context, stop <-chan struct{}, cfg *pollConfig, what string, err error, attrs ...any) error {
	if cfg.retryInterval == 0 || ctx.Err() != nil || errors.Is(err, iggy.ErrClosed) {
		return err
	}
	cfg.logger.Warn("live: "+what+" failed; retrying", append(attrs, "in", cfg.retryInterval, "error", err)...)
	if serr := sleep(ctx, stop, cfg.retryInterval); serr != nil {
		return fmt.Errorf("%w (while waiting to retry after: %w)", serr, err)
	}
	return nil
}
