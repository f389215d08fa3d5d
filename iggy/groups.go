package iggy

import (
	"context"
	"errors"

	"github.com/ferryhq/ferry/iggy/wire"
)

// GroupAssignment is what SyncConsumerGroup returns: the membership
// generation and the partitions this member may poll now.
type GroupAssignment = wire.SyncGroupReply

// CreateConsumerGroup creates a consumer group on a topic and returns it.
// Group ids are per topic and never reused.
func (c *Client) CreateConsumerGroup(ctx context.Context, stream, topic Identifier, name string) (*GroupDetails, error) {
	const cmd = wire.CmdCreateConsumerGroup
	if err := checkIDs(cmd, stream, topic); err != nil {
		return nil, err
	}
	if err := checkName(cmd, "group", name); err != nil {
		return nil, err
	}
	return fetch[GroupDetails](ctx, c, cmd, &wire.CreateConsumerGroup{Stream: stream, Topic: topic, Name: name}, 0)
}

// GetConsumerGroup returns a group with its members and their partitions;
// a missing group is ErrConsumerGroupNotFound.
func (c *Client) GetConsumerGroup(ctx context.Context, stream, topic, group Identifier) (*GroupDetails, error) {
	if err := checkIDs(wire.CmdGetConsumerGroup, stream, topic, group); err != nil {
		return nil, err
	}
	return fetch[GroupDetails](ctx, c, wire.CmdGetConsumerGroup,
		&wire.GroupRef{Stream: stream, Topic: topic, Group: group}, wire.ErrConsumerGroupIDNotFound.Code)
}

// ListConsumerGroups returns the groups of a topic.
func (c *Client) ListConsumerGroups(ctx context.Context, stream, topic Identifier) ([]GroupHeader, error) {
	if err := checkIDs(wire.CmdGetConsumerGroups, stream, topic); err != nil {
		return nil, err
	}
	l, err := fetch[wire.GroupList](ctx, c, wire.CmdGetConsumerGroups, &wire.TopicRef{Stream: stream, Topic: topic}, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// DeleteConsumerGroup deletes a group and its stored offsets.
func (c *Client) DeleteConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	if err := checkIDs(wire.CmdDeleteConsumerGroup, stream, topic, group); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdDeleteConsumerGroup, &wire.GroupRef{Stream: stream, Topic: topic, Group: group})
	if err == nil {
		c.forgetGroup(groupKey{stream, topic, group})
	}
	return err
}

// JoinConsumerGroup makes this client a member of a group (idempotent).
// The client re-joins it after every reconnect until LeaveConsumerGroup;
// leave with the same identifiers you joined with.
func (c *Client) JoinConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	if err := checkIDs(wire.CmdJoinConsumerGroup, stream, topic, group); err != nil {
		return err
	}
	k := groupKey{stream, topic, group}
	// Record the membership first, so a reconnect racing with this call
	// re-joins; forget it again if the server said no.
	c.mu.Lock()
	_, had := c.groups[k]
	c.groups[k] = struct{}{}
	c.mu.Unlock()
	_, err := c.call(ctx, wire.CmdJoinConsumerGroup, &wire.GroupRef{Stream: stream, Topic: topic, Group: group})
	var ie *Error
	if err != nil && !had && errors.As(err, &ie) {
		c.forgetGroup(k)
	}
	return err
}

// LeaveConsumerGroup ends this client's membership of a group; a client
// that is not a member gets ErrConsumerGroupMemberNotFound.
func (c *Client) LeaveConsumerGroup(ctx context.Context, stream, topic, group Identifier) error {
	if err := checkIDs(wire.CmdLeaveConsumerGroup, stream, topic, group); err != nil {
		return err
	}
	c.forgetGroup(groupKey{stream, topic, group})
	_, err := c.call(ctx, wire.CmdLeaveConsumerGroup, &wire.GroupRef{Stream: stream, Topic: topic, Group: group})
	return err
}

// SyncConsumerGroup returns this member's generation and the partitions
// it may poll now (assigned and not pending revocation). A client that is
// not a member gets ErrConsumerGroupMemberNotFound.
func (c *Client) SyncConsumerGroup(ctx context.Context, stream, topic, group Identifier) (*GroupAssignment, error) {
	if err := checkIDs(wire.CmdSyncConsumerGroup, stream, topic, group); err != nil {
		return nil, err
	}
	return fetch[GroupAssignment](ctx, c, wire.CmdSyncConsumerGroup,
		&wire.GroupRef{Stream: stream, Topic: topic, Group: group}, wire.ErrConsumerGroupMemberNotFound.Code)
}

func (c *Client) forgetGroup(k groupKey) {
	c.mu.Lock()
	delete(c.groups, k)
	c.mu.Unlock()
}
