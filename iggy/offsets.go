package iggy

import (
	"context"

	"github.com/ferryhq/ferry/iggy/wire"
)

// StoreConsumerOffset stores offset as the last consumed offset of
// consumer on a partition; a poll with Next resumes after it. The offset
// may not exceed the partition's current offset (ErrInvalidOffset). A
// group offset can only be stored by the member that owns the partition.
func (c *Client) StoreConsumerOffset(ctx context.Context, consumer Consumer, stream, topic Identifier, partition OptPartition, offset uint64) error {
	const cmd = wire.CmdStoreConsumerOffset
	if err := checkOffsetArgs(cmd, consumer, stream, topic); err != nil {
		return err
	}
	_, err := c.call(ctx, cmd, &wire.StoreConsumerOffset{
		ConsumerOffsetRef: wire.ConsumerOffsetRef{Consumer: consumer, Stream: stream, Topic: topic, Partition: partition},
		Offset:            offset, Ack: wire.AckQuorum})
	return err
}

// GetConsumerOffset returns the stored and current offsets of consumer on
// a partition; nothing stored is ErrConsumerOffsetNotFound.
func (c *Client) GetConsumerOffset(ctx context.Context, consumer Consumer, stream, topic Identifier, partition OptPartition) (*ConsumerOffsetInfo, error) {
	const cmd = wire.CmdGetConsumerOffset
	if err := checkOffsetArgs(cmd, consumer, stream, topic); err != nil {
		return nil, err
	}
	return fetch[ConsumerOffsetInfo](ctx, c, cmd,
		&wire.ConsumerOffsetRef{Consumer: consumer, Stream: stream, Topic: topic, Partition: partition},
		wire.ErrConsumerOffsetNotFound.Code)
}

// DeleteConsumerOffset removes the stored offset of consumer on a
// partition; nothing stored is ErrConsumerOffsetNotFound.
func (c *Client) DeleteConsumerOffset(ctx context.Context, consumer Consumer, stream, topic Identifier, partition OptPartition) error {
	const cmd = wire.CmdDeleteConsumerOffset
	if err := checkOffsetArgs(cmd, consumer, stream, topic); err != nil {
		return err
	}
	_, err := c.call(ctx, cmd, &wire.DeleteConsumerOffset{
		ConsumerOffsetRef: wire.ConsumerOffsetRef{Consumer: consumer, Stream: stream, Topic: topic, Partition: partition},
		Ack:               wire.AckQuorum})
	return err
}

func checkOffsetArgs(cmd wire.Command, consumer Consumer, stream, topic Identifier) error {
	if err := checkConsumer(cmd, consumer); err != nil {
		return err
	}
	return checkIDs(cmd, stream, topic)
}
