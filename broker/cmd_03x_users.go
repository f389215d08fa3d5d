package broker

// Users (codes 31-37; the model is in users.go, the rights each command
// needs in authz.go).
//
// get_user (31) answers UserDetails, or an empty body when the user does
// not exist; get_users (32) the users' infos back to back, by id.
// create_user (33, op 141) checks the username (3..50 bytes, else 43) and
// password (3..100, else 44), refuses a taken username with the committed
// 46, hashes the password with argon2id and replies UserDetails.
// delete_user (34, op 143): unknown is the committed 20, root 48.
// update_user (35, op 142) renames (43, 46) and sets the status;
// update_permissions (36, op 145) replaces the permissions (nil removes
// them; root is 49). change_password (37, op 144) checks both lengths
// (44) and the current password (the committed 42). A missing user is the
// committed 20 for 34-37.
//
// Deviations, for safety: root cannot be deactivated (48, as deleting it;
// upstream allows it, which would leave no one able to manage users), and
// deleting or deactivating a user ends its sessions at once, with an
// Eviction(UserInactive) (clients read it as Unauthenticated, 40);
// upstream keeps a deactivated user's sessions and answers a deleted
// one's commands 41. Every change is saved before the reply.

import (
	"github.com/ferryhq/ferry/iggy/wire"
)

func handleGetUser(b *Broker, r *request) reply {
	var req wire.UserRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	u := b.userBy(req.User)
	if u == nil {
		return raw(nil)
	}
	d := u.details()
	return rawOf(&d)
}

func handleGetUsers(b *Broker, r *request) reply {
	b.mu.RLock()
	defer b.mu.RUnlock()
	list := wire.UserList{}
	for _, id := range sortedKeys(b.users) {
		list = append(list, b.users[id].info())
	}
	return rawOf(&list)
}

func handleCreateUser(b *Broker, r *request) reply {
	var req wire.CreateUser
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if code := checkUsername(req.Username); code != 0 {
		return status(code)
	}
	if code := checkNewPassword(req.Password); code != 0 {
		return status(code)
	}
	hash, err := hashPassword(req.Password) // slow: outside the lock
	if err != nil {
		return b.writeFailed("create user", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.userNamed(req.Username) != nil {
		return rejected(wire.ErrUserAlreadyExists.Code)
	}
	u := &user{id: b.nextUserID, name: req.Username, status: req.Status, createdAt: nowMicros(),
		password: hash, perms: req.Permissions, pats: map[string]*pat{}}
	b.users[u.id] = u
	b.nextUserID++
	if err := b.saveMeta(); err != nil {
		delete(b.users, u.id)
		b.nextUserID--
		return b.writeFailed("create user", err)
	}
	b.log.Info("user created", "user", u.name, "id", u.id, "status", u.status)
	d := u.details()
	return okResult(&d)
}

func handleDeleteUser(b *Broker, r *request) reply {
	var req wire.UserRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.userBy(req.User)
	switch {
	case u == nil:
		return rejected(wire.ErrResourceNotFound.Code)
	case u.id == rootUserID:
		return rejected(wire.ErrCannotDeleteUser.Code)
	}
	delete(b.users, u.id)
	if err := b.saveMeta(); err != nil {
		b.users[u.id] = u
		return b.writeFailed("delete user", err)
	}
	b.verified.forget(u.id)
	b.log.Info("user deleted", "user", u.name, "id", u.id)
	rep := okResult(nil)
	rep.drop = b.endSessions(u.id, r.c)
	return rep
}

func handleUpdateUser(b *Broker, r *request) reply {
	var req wire.UpdateUser
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if req.Username != nil {
		if code := checkUsername(*req.Username); code != 0 {
			return status(code)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.userBy(req.User)
	if u == nil {
		return rejected(wire.ErrResourceNotFound.Code)
	}
	if req.Username != nil {
		if o := b.userNamed(*req.Username); o != nil && o != u {
			return rejected(wire.ErrUserAlreadyExists.Code)
		}
	}
	if req.Status != nil && *req.Status != wire.UserActive && u.id == rootUserID {
		return rejected(wire.ErrCannotDeleteUser.Code)
	}
	oldName, oldStatus := u.name, u.status
	if req.Username != nil {
		u.name = *req.Username
	}
	if req.Status != nil {
		u.status = *req.Status
	}
	if err := b.saveMeta(); err != nil {
		u.name, u.status = oldName, oldStatus
		return b.writeFailed("update user", err)
	}
	b.log.Info("user updated", "user", u.name, "id", u.id, "status", u.status)
	rep := okResult(nil)
	if u.status != wire.UserActive && oldStatus == wire.UserActive {
		rep.drop = b.endSessions(u.id, r.c)
	}
	return rep
}

func handleUpdatePermissions(b *Broker, r *request) reply {
	var req wire.UpdatePermissions
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.userBy(req.User)
	switch {
	case u == nil:
		return rejected(wire.ErrResourceNotFound.Code)
	case u.id == rootUserID:
		return rejected(wire.ErrCannotChangePermissions.Code)
	}
	old := u.perms
	u.perms = req.Permissions
	if err := b.saveMeta(); err != nil {
		u.perms = old
		return b.writeFailed("update permissions", err)
	}
	b.log.Info("user permissions updated", "user", u.name, "id", u.id)
	return okResult(nil)
}

func handleChangePassword(b *Broker, r *request) reply {
	var req wire.ChangePassword
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if checkNewPassword(req.CurrentPassword) != 0 || checkNewPassword(req.NewPass) != 0 {
		return status(wire.ErrInvalidPassword.Code)
	}
	b.mu.RLock()
	u := b.userBy(req.User)
	var stored string
	if u != nil {
		stored = u.password
	}
	b.mu.RUnlock()
	if u == nil {
		return rejected(wire.ErrResourceNotFound.Code)
	}
	// argon2id twice, outside the lock; the hash must be unchanged after.
	if !verifyPassword(stored, req.CurrentPassword) {
		return rejected(wire.ErrInvalidCredentials.Code)
	}
	hash, err := hashPassword(req.NewPass)
	if err != nil {
		return b.writeFailed("change password", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.users[u.id] != u {
		return rejected(wire.ErrResourceNotFound.Code)
	}
	if u.password != stored {
		return rejected(wire.ErrInvalidCredentials.Code) // changed meanwhile
	}
	u.password = hash
	if err := b.saveMeta(); err != nil {
		u.password = stored
		return b.writeFailed("change password", err)
	}
	b.verified.forget(u.id)
	b.log.Info("user password changed", "user", u.name, "id", u.id)
	return okResult(nil)
}

// endSessions evicts every connection bound to user id with
// UserInactive, except self (the requester, whose reply is still to be
// sent): it reports whether self is one, to be closed after its reply.
// Caller holds b.mu; conn.mu and Broker.connsMu are taken after it, as
// locksordering.txt allows.
func (b *Broker) endSessions(id uint32, self *conn) (selfToo bool) {
	for _, c := range b.connList() {
		bound, _, _, uid := c.sessionInfo()
		if !bound || uid != id {
			continue
		}
		if c == self {
			selfToo = true
			continue
		}
		b.log.Info("ending a session of a deleted or deactivated user", "conn", c.id, "user_id", id)
		c.evict(wire.EvictUserInactive)
	}
	return selfToo
}
