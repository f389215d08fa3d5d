package iggy

// Users and permissions (codes 31-37). A user other than root has only
// the rights its Permissions give (see wire.Permissions for the layout and
// the broker's authz.go for what each command needs); a command it may
// not run fails with ErrUnauthorized.

import (
	"context"
	"fmt"

	"github.com/ferryhq/ferry/iggy/wire"
)

type (
	// UserStatus is a user's status: UserActive or UserInactive.
	UserStatus = wire.UserStatus
	// UserInfo describes a user: id, creation time, status and username.
	UserInfo = wire.UserInfo
	// UserDetails is a user with its permissions.
	UserDetails = wire.UserDetails
	// Permissions are a user's rights: global ones and per stream and topic.
	Permissions = wire.Permissions
	// GlobalPermissions are a user's rights over the whole server.
	GlobalPermissions = wire.GlobalPermissions
	// StreamPermissions are a user's rights on one stream and its topics.
	StreamPermissions = wire.StreamPermissions
	// TopicPermissions are a user's rights on one topic.
	TopicPermissions = wire.TopicPermissions
)

// User statuses.
const (
	UserActive   = wire.UserActive
	UserInactive = wire.UserInactive
)

// More error codes of the user commands, for errors.Is.
var (
	ErrInvalidUsername         = wire.ErrInvalidUsername
	ErrInvalidPassword         = wire.ErrInvalidPassword
	ErrUserAlreadyExists       = wire.ErrUserAlreadyExists
	ErrCannotDeleteUser        = wire.ErrCannotDeleteUser
	ErrCannotChangePermissions = wire.ErrCannotChangePermissions
	ErrUserNotFound            = wire.ErrResourceNotFound
)

// checkCredential checks a username (3..50 bytes) or password (3..100)
// before it is encoded, as the server does.
func checkCredential(cmd wire.Command, what string, s string, lo, hi int, code error) error {
	if n := len(s); n < lo || n > hi {
		return fmt.Errorf("iggy: %s: %s must be %d..%d bytes, got %d: %w", cmd, what, lo, hi, n, code)
	}
	return nil
}

func checkUsername(cmd wire.Command, name string) error {
	return checkCredential(cmd, "username", name, 3, 50, ErrInvalidUsername)
}

func checkPassword(cmd wire.Command, what, pass string) error {
	return checkCredential(cmd, what, pass, 3, 100, ErrInvalidPassword)
}

// CreateUser creates a user and returns it; perms nil gives it no rights.
func (c *Client) CreateUser(ctx context.Context, username, password string, status UserStatus, perms *Permissions) (*UserDetails, error) {
	cmd := wire.CmdCreateUser
	if err := checkUsername(cmd, username); err != nil {
		return nil, err
	}
	if err := checkPassword(cmd, "password", password); err != nil {
		return nil, err
	}
	if !status.Valid() {
		return nil, fmt.Errorf("iggy: %s: status %d is neither active nor inactive: %w", cmd, status, wire.ErrInvalidUserStatus)
	}
	return fetch[UserDetails](ctx, c, cmd, &wire.CreateUser{Username: username, Password: password, Status: status, Permissions: perms}, 0)
}

// GetUser returns a user by id or username; a missing one is
// ErrUserNotFound.
func (c *Client) GetUser(ctx context.Context, user Identifier) (*UserDetails, error) {
	if err := user.Validate(); err != nil {
		return nil, fmt.Errorf("iggy: %s: user id: %w", wire.CmdGetUser, err)
	}
	return fetch[UserDetails](ctx, c, wire.CmdGetUser, &wire.UserRef{User: user}, wire.ErrResourceNotFound.Code)
}

// ListUsers returns every user, by id.
func (c *Client) ListUsers(ctx context.Context) ([]UserInfo, error) {
	l, err := fetch[wire.UserList](ctx, c, wire.CmdGetUsers, nil, 0)
	if err != nil {
		return nil, err
	}
	return *l, nil
}

// UpdateUser renames a user (username non-empty) and/or sets its status
// (status non-zero).
func (c *Client) UpdateUser(ctx context.Context, user Identifier, username string, status UserStatus) error {
	cmd := wire.CmdUpdateUser
	if err := user.Validate(); err != nil {
		return fmt.Errorf("iggy: %s: user id: %w", cmd, err)
	}
	req := &wire.UpdateUser{User: user}
	if username != "" {
		if err := checkUsername(cmd, username); err != nil {
			return err
		}
		req.Username = &username
	}
	if status != 0 {
		if !status.Valid() {
			return fmt.Errorf("iggy: %s: status %d is neither active nor inactive: %w", cmd, status, wire.ErrInvalidUserStatus)
		}
		req.Status = &status
	}
	if req.Username == nil && req.Status == nil {
		return fmt.Errorf("iggy: %s: nothing to change: give a username or a status: %w", cmd, wire.ErrInvalidFormat)
	}
	_, err := c.call(ctx, cmd, req)
	return err
}

// UpdatePermissions replaces a user's permissions; nil removes them all.
func (c *Client) UpdatePermissions(ctx context.Context, user Identifier, perms *Permissions) error {
	if err := user.Validate(); err != nil {
		return fmt.Errorf("iggy: %s: user id: %w", wire.CmdUpdatePermissions, err)
	}
	_, err := c.call(ctx, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: user, Permissions: perms})
	return err
}

// ChangePassword changes a user's password; the current one must match.
func (c *Client) ChangePassword(ctx context.Context, user Identifier, current, newPassword string) error {
	cmd := wire.CmdChangePassword
	if err := user.Validate(); err != nil {
		return fmt.Errorf("iggy: %s: user id: %w", cmd, err)
	}
	if err := checkPassword(cmd, "current password", current); err != nil {
		return err
	}
	if err := checkPassword(cmd, "new password", newPassword); err != nil {
		return err
	}
	_, err := c.call(ctx, cmd, &wire.ChangePassword{User: user, CurrentPassword: current, NewPass: newPassword})
	return err
}

// DeleteUser deletes a user; its sessions end. Root cannot be deleted.
func (c *Client) DeleteUser(ctx context.Context, user Identifier) error {
	if err := user.Validate(); err != nil {
		return fmt.Errorf("iggy: %s: user id: %w", wire.CmdDeleteUser, err)
	}
	_, err := c.call(ctx, wire.CmdDeleteUser, &wire.UserRef{User: user})
	return err
}
