package iggy

import (
	"context"

	"github.com/ferryhq/ferry/iggy/wire"
)

// CreateStream creates a stream and returns it (with no topics). The
// server picks the lowest free id.
func (c *Client) CreateStream(ctx context.Context, name string) (*StreamDetails, error) {
	if err := checkName(wire.CmdCreateStream, "stream", name); err != nil {
		return nil, err
	}
	return fetch[StreamDetails](ctx, c, wire.CmdCreateStream, &wire.CreateStream{Name: name}, 0)
}

// GetStream returns a stream with its topics; a missing stream is
// ErrStreamNotFound.
func (c *Client) GetStream(ctx context.Context, stream Identifier) (*StreamDetails, error) {
	if err := checkIDs(wire.CmdGetStream, stream); err != nil {
		return nil, err
	}
	return fetch[StreamDetails](ctx, c, wire.CmdGetStream, &wire.StreamRef{Stream: stream}, wire.ErrStreamIDNotFound.Code)
}

// ListStreams returns every stream; none is an empty, non-nil slice.
func (c *Client) ListStreams(ctx context.Context) ([]StreamHeader, error) {
	l, err := fetch[wire.StreamList](ctx, c, wire.CmdGetStreams, nil, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// UpdateStream renames a stream.
func (c *Client) UpdateStream(ctx context.Context, stream Identifier, name string) error {
	if err := checkIDs(wire.CmdUpdateStream, stream); err != nil {
		return err
	}
	if err := checkName(wire.CmdUpdateStream, "stream", name); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdUpdateStream, &wire.UpdateStream{Stream: stream, Name: name})
	return err
}

// DeleteStream deletes a stream with its topics and messages.
func (c *Client) DeleteStream(ctx context.Context, stream Identifier) error {
	if err := checkIDs(wire.CmdDeleteStream, stream); err != nil {
		return err
	}
	defer c.parts.invalidate()
	_, err := c.call(ctx, wire.CmdDeleteStream, &wire.StreamRef{Stream: stream})
	return err
}

// PurgeStream deletes every message of every topic of a stream.
func (c *Client) PurgeStream(ctx context.Context, stream Identifier) error {
	if err := checkIDs(wire.CmdPurgeStream, stream); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdPurgeStream, &wire.StreamRef{Stream: stream})
	return err
}
