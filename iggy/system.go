package iggy

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Ping checks the connection. It is the one command the server answers
// before login.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, wire.CmdPing, nil, nil)
}

// Stats returns the server's statistics.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	return fetch[Stats](ctx, c, wire.CmdGetStats, nil, 0)
}

// ClusterMetadata returns the cluster's name and nodes.
func (c *Client) ClusterMetadata(ctx context.Context) (*ClusterMetadata, error) {
	return fetch[ClusterMetadata](ctx, c, wire.CmdGetClusterMetadata, nil, 0)
}

// Me returns this connection as the server sees it, with its groups.
func (c *Client) Me(ctx context.Context) (*ClientInfo, error) {
	return fetch[ClientInfo](ctx, c, wire.CmdGetMe, nil, 0)
}

// GetClient returns one connected client by its id; an unknown id is
// ErrResourceNotFound.
func (c *Client) GetClient(ctx context.Context, id uint32) (*ClientInfo, error) {
	return fetch[ClientInfo](ctx, c, wire.CmdGetClient, &wire.GetClient{ClientID: id}, wire.ErrClientNotFound.Code)
}

// ListClients returns every connected client (without their groups).
func (c *Client) ListClients(ctx context.Context) ([]ClientInfo, error) {
	l, err := fetch[wire.ClientList](ctx, c, wire.CmdGetClients, nil, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// SnapshotCompression is the archive compression of Snapshot.
type SnapshotCompression uint8

// Snapshot compressions.
const (
	SnapshotStored   SnapshotCompression = 1
	SnapshotDeflated SnapshotCompression = 2
	SnapshotBzip2    SnapshotCompression = 3
	SnapshotZstd     SnapshotCompression = 4
	SnapshotLZMA     SnapshotCompression = 5
	SnapshotXZ       SnapshotCompression = 6
)

// SnapshotType is one kind of entry of a Snapshot archive.
type SnapshotType uint8

// Snapshot types. SnapshotAll must be given alone.
const (
	SnapshotFilesystemOverview SnapshotType = 1
	SnapshotProcessList        SnapshotType = 2
	SnapshotResourceUsage      SnapshotType = 3
	SnapshotTest               SnapshotType = 4
	SnapshotServerLogs         SnapshotType = 5
	SnapshotServerConfig       SnapshotType = 6
	SnapshotAll                SnapshotType = 100
)

// Snapshot asks the server for a diagnostic ZIP archive and returns its
// raw bytes. With no types it asks for SnapshotAll.
func (c *Client) Snapshot(ctx context.Context, compression SnapshotCompression, types ...SnapshotType) ([]byte, error) {
	if len(types) == 0 {
		types = []SnapshotType{SnapshotAll}
	}
	if len(types) > 255 {
		return nil, fmt.Errorf("iggy: get_snapshot: %d types, at most 255", len(types))
	}
	req := &wire.GetSnapshot{Compression: uint8(compression), Types: make([]uint8, len(types))}
	for i, t := range types {
		req.Types[i] = uint8(t)
	}
	return c.call(ctx, wire.CmdGetSnapshot, req)
}

// OptionScope selects the catalog DescribeOptions lists.
type OptionScope = wire.OptionScope

// Option scopes of DescribeOptions.
const (
	ScopeTopic  = wire.ScopeTopic
	ScopeStream = wire.ScopeStream
	ScopeUser   = wire.ScopeUser
)

// DescribeOptions lists the options the server accepts in a scope, with
// their kinds, defaults and descriptions.
func (c *Client) DescribeOptions(ctx context.Context, scope OptionScope) ([]OptionDescriptor, error) {
	r, err := fetch[wire.DescribeOptionsReply](ctx, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: scope}, 0)
	if err != nil {
		return nil, err
	}
	if r.Options == nil {
		r.Options = []OptionDescriptor{}
	}
	return r.Options, nil
}

// CreatePAT creates a personal access token for the logged-in user and
// returns it; expiry 0 means it never expires.
func (c *Client) CreatePAT(ctx context.Context, name string, expiry time.Duration) (string, error) {
	if n := len(name); n < 3 || n > 30 {
		return "", fmt.Errorf("iggy: %s: token name must be 3..30 bytes, got %d: %w", wire.CmdCreatePAT, n, wire.ErrInvalidPATName)
	}
	if expiry < 0 {
		return "", fmt.Errorf("iggy: %s: expiry %s is negative", wire.CmdCreatePAT, expiry)
	}
	r, err := fetch[wire.CreatePATReply](ctx, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: name, Expiry: uint64(expiry / time.Microsecond)}, 0)
	if err != nil {
		return "", err
	}
	return r.Token, nil
}

// DeletePAT deletes a personal access token by name.
func (c *Client) DeletePAT(ctx context.Context, name string) error {
	if err := checkName(wire.CmdDeletePAT, "token", name); err != nil {
		return err
	}
	_, err := c.call(ctx, wire.CmdDeletePAT, &wire.DeletePAT{Name: name})
	return err
}

// ListPATs lists the logged-in user's personal access tokens.
func (c *Client) ListPATs(ctx context.Context) ([]PATInfo, error) {
	l, err := fetch[wire.PATList](ctx, c, wire.CmdGetPATs, nil, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// checkName checks a resource name before it is encoded: 1..255 bytes.
func checkName(cmd wire.Command, what, name string) error {
	if len(name) == 0 || len(name) > 255 {
		return fmt.Errorf("iggy: %s: %s name must be 1..255 bytes, got %d: %w", cmd, what, len(name), wire.ErrInvalidFormat)
	}
	return nil
}
