package broker

// Users: the model, the root user's bootstrap and the users' part of
// metadata.json. The commands are in cmd_03x_users.go, permission checks
// in authz.go, password hashing in passwords.go.
//
// Root is user 0, always holds every permission, and cannot be deleted,
// deactivated or have its permissions changed. It is made from
// Config.RootUsername/RootPassword when the broker starts with no users
// (a new data directory, or in memory), as upstream does; later starts
// keep the stored root unless Config.ResetRoot says the config owns it.
// New users get ids from a counter that never goes back, so a deleted
// user's id (and a session still bound to it) never names another user.

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Limits of user fields, upstream's (core/common defaults): lengths are
// in bytes.
const (
	minUsernameLen, maxUsernameLen = 3, 50
	minPasswordLen, maxPasswordLen = 3, 100
	minPATNameLen, maxPATNameLen   = 3, 30
	maxPATsPerUser                 = 100
)

// user is one user. Guarded by Broker.mu.
type user struct {
	id        uint32
	name      string
	status    wire.UserStatus
	createdAt uint64
	password  string            // argon2id PHC string
	perms     *wire.Permissions // nil: none (root's are implied)
	pats      map[string]*pat   // by name
}

func (u *user) info() wire.UserInfo {
	return wire.UserInfo{ID: u.id, CreatedAt: u.createdAt, Status: u.status, Username: u.name}
}

func (u *user) details() wire.UserDetails {
	d := wire.UserDetails{UserInfo: u.info(), Permissions: u.perms}
	if u.id == rootUserID {
		d.Permissions = wire.AllPermissions()
	}
	return d
}

// userBy resolves a user by id or username. Caller holds b.mu.
func (b *Broker) userBy(id wire.Identifier) *user {
	return byID(b.users, id, func(u *user) string { return u.name })
}

// userNamed returns the user called name, or nil. Caller holds b.mu.
func (b *Broker) userNamed(name string) *user {
	for _, u := range b.users {
		if u.name == name {
			return u
		}
	}
	return nil
}

// checkUsername and checkPassword apply upstream's length limits,
// returning the status of a violation or 0.
func checkUsername(name string) wire.Code {
	if n := len(name); n < minUsernameLen || n > maxUsernameLen {
		return wire.ErrInvalidUsername.Code
	}
	return 0
}

func checkNewPassword(pass string) wire.Code {
	if n := len(pass); n < minPasswordLen || n > maxPasswordLen {
		return wire.ErrInvalidPassword.Code
	}
	return 0
}

// bootstrapRoot makes the root user from the configured credentials when
// there are no users, or resets its credentials when Config.ResetRoot.
// It reports whether anything changed (so metadata must be saved).
func (b *Broker) bootstrapRoot() (bool, error) {
	root := b.users[rootUserID]
	if root != nil && !b.cfg.ResetRoot {
		return false, nil
	}
	if root != nil && root.name == b.cfg.RootUsername && verifyPassword(root.password, b.cfg.RootPassword) {
		b.verified.remember(rootUserID, root.password, b.cfg.RootPassword)
		return false, nil
	}
	hash, err := hashPassword(b.cfg.RootPassword)
	if err != nil {
		return false, fmt.Errorf("broker: root user: %w", err)
	}
	if root == nil {
		root = &user{id: rootUserID, status: wire.UserActive, createdAt: nowMicros(), pats: map[string]*pat{}}
		b.users[rootUserID] = root
		b.nextUserID = max(b.nextUserID, rootUserID+1)
	}
	if o := b.userNamed(b.cfg.RootUsername); o != nil && o != root {
		return false, fmt.Errorf("broker: root user: the username %q (RootUsername) belongs to user %d", b.cfg.RootUsername, o.id)
	}
	root.name, root.password, root.status = b.cfg.RootUsername, hash, wire.UserActive
	b.verified.remember(rootUserID, hash, b.cfg.RootPassword)
	return true, nil
}

// metaUser is a user in metadata.json.
type metaUser struct {
	ID           uint32            `json:"id"`
	Username     string            `json:"username"`
	Status       wire.UserStatus   `json:"status"`
	CreatedAt    uint64            `json:"created_at"`
	PasswordHash string            `json:"password_hash"`
	Permissions  *wire.Permissions `json:"permissions,omitempty"`
	PATs         []metaPAT         `json:"personal_access_tokens"`
}

// snapshotUsers captures the users in id order. Caller holds b.mu.
func (b *Broker) snapshotUsers() []metaUser {
	out := []metaUser{}
	for _, id := range sortedKeys(b.users) {
		u := b.users[id]
		mu := metaUser{ID: u.id, Username: u.name, Status: u.status, CreatedAt: u.createdAt,
			PasswordHash: u.password, Permissions: u.perms, PATs: []metaPAT{}}
		names := make([]string, 0, len(u.pats))
		for name := range u.pats {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := u.pats[name]
			mu.PATs = append(mu.PATs, metaPAT{Name: p.name, SHA256: hex.EncodeToString(p.hash[:]), ExpiresAt: p.expiresAt})
		}
		out = append(out, mu)
	}
	return out
}

// checkMetaUsers validates the users of a metadata file.
func checkMetaUsers(users []metaUser, next uint32) error {
	ids := map[uint32]bool{}
	names := map[string]bool{}
	for _, u := range users {
		switch {
		case ids[u.ID] || (u.ID >= next && next != 0):
			return fmt.Errorf("metadata: user %d: duplicate id or not below next_user_id %d", u.ID, next)
		case names[u.Username] || checkUsername(u.Username) != 0:
			return fmt.Errorf("metadata: user %d: duplicate or invalid username %q", u.ID, u.Username)
		case !u.Status.Valid():
			return fmt.Errorf("metadata: user %d: status %d", u.ID, u.Status)
		}
		if _, err := parsePHC(u.PasswordHash); err != nil {
			return fmt.Errorf("metadata: user %d: password hash: %w", u.ID, err)
		}
		if u.Permissions != nil {
			for sid, s := range u.Permissions.Streams {
				if s == nil || slices.Contains(slices.Collect(maps.Values(s.Topics)), nil) {
					return fmt.Errorf("metadata: user %d: permissions on stream %d: null entry", u.ID, sid)
				}
			}
		}
		ids[u.ID], names[u.Username] = true, true
		if err := checkMetaPATs(u.PATs); err != nil {
			return fmt.Errorf("metadata: user %d: %w", u.ID, err)
		}
	}
	return nil
}

func checkMetaPATs(pats []metaPAT) error {
	seen := map[string]bool{}
	for _, p := range pats {
		if h, err := hex.DecodeString(p.SHA256); err != nil || len(h) != 32 || p.Name == "" || seen[p.Name] {
			return fmt.Errorf("personal access token %q: bad hash, empty or duplicate name", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// restoreUsers loads the users of a checked metadata file.
func (b *Broker) restoreUsers(users []metaUser, next uint32) {
	b.nextUserID = next
	for _, mu := range users {
		u := &user{id: mu.ID, name: mu.Username, status: mu.Status, createdAt: mu.CreatedAt,
			password: mu.PasswordHash, perms: mu.Permissions, pats: map[string]*pat{}}
		u.pats = restorePATs(mu.PATs)
		b.users[u.id] = u
		b.nextUserID = max(b.nextUserID, u.id+1)
	}
}

func restorePATs(pats []metaPAT) map[string]*pat {
	m := map[string]*pat{}
	for _, mp := range pats {
		p := &pat{name: mp.Name, expiresAt: mp.ExpiresAt}
		h, _ := hex.DecodeString(mp.SHA256)
		copy(p.hash[:], h)
		m[p.name] = p
	}
	return m
}

// forgetPermissionsOn removes every user's permissions on stream sid (all
// of them) or, when topic is set, on topic tid of it: ids are reused after
// a delete, and a right on the deleted stream or topic must not become one
// on its successor. It returns a function that puts them back, for when
// the delete fails to save. Caller holds b.mu for writing.
func (b *Broker) forgetPermissionsOn(sid uint32, topic bool, tid uint32) (undo func()) {
	var undos []func()
	for _, u := range b.users {
		if u.perms == nil || u.perms.Streams[sid] == nil {
			continue
		}
		sp := u.perms.Streams[sid]
		if !topic {
			delete(u.perms.Streams, sid)
			undos = append(undos, func() { u.perms.Streams[sid] = sp })
			continue
		}
		if tp := sp.Topics[tid]; tp != nil {
			delete(sp.Topics, tid)
			undos = append(undos, func() { sp.Topics[tid] = tp })
		}
	}
	return func() {
		for _, f := range undos {
			f()
		}
	}
}
