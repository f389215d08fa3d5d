package broker

// Sessions (fact sheet §3). A connection binds to a session with Register
// (codes 40/45, operation 1) and unbinds with Logout (39, operation 3) or by
// disconnecting. The binding is per connection: the session value is the
// commit number of the Register (so > 0 and monotonic), and the client id
// of the Register is the connection's identity in consumer groups.
//
// Register, in order: a bound transport gets its existing session back;
// a body shorter than the version prefix is Eviction(MalformedLogin); a
// version outside 0.11.x is Eviction(IncompatibleProtocol) with the window
// 0.11.0..0.11.0; a body that is neither the password nor the token shape
// is Eviction(MalformedLogin); an unknown user, a wrong password, an
// inactive user or a username/password outside 3..50/3..100 bytes is
// Eviction(InvalidCredentials) (so a login does not tell which); a token
// that is unknown or expired is Eviction(InvalidToken), a token of an
// inactive user Eviction(UserInactive). Passwords are checked against
// their argon2id hashes (passwords.go). Success replies
// [0u32][user_id u32][session u64][protocol u32][server version].
// Password and token checks go through the login limiter
// (login_limit.go), which may delay them.

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

// rootUserID is the id of the root user.
const rootUserID = 0

// pat is a personal access token of a user; only its hash is kept.
type pat struct {
	name      string
	hash      [sha256.Size]byte
	expiresAt uint64 // µs since the epoch; 0 = never
}

func (p *pat) expired(now uint64) bool { return p.expiresAt != 0 && now >= p.expiresAt }

func registerReply(user uint32, session uint64) reply {
	return okResult(&wire.RegisterReply{
		UserID: user, Session: session, ProtocolVersion: wire.ProtocolVersion, ServerVersion: ServerVersion,
	})
}

func (b *Broker) register(r *request) reply {
	c := r.c
	if bound, session, _, user := c.sessionInfo(); bound {
		return registerReply(user, session)
	}
	if len(r.body) < 4 {
		return reply{evict: wire.EvictMalformedLogin}
	}
	if v := binary.LittleEndian.Uint32(r.body); !wire.VersionCompatible(v, wire.ProtocolVersion) {
		b.log.Info("login refused: incompatible protocol", "conn", c.id, "client_version", wire.FormatVersion(v))
		return reply{evict: wire.EvictIncompatibleProtocol}
	}
	pw, tok, err := wire.DecodeRegisterBody(r.body)
	if err != nil {
		b.log.Info("login refused: malformed body", "conn", c.id, "err", err)
		return reply{evict: wire.EvictMalformedLogin}
	}
	uid, rep, ok := b.checkCredentials(c, pw, tok)
	if !ok {
		return rep
	}
	// Bind under Broker.mu, the user still there and active: a delete or
	// deactivation that committed while the credentials were checked (the
	// hash takes tens of milliseconds, outside the lock) ended the user's
	// sessions before this one was bound.
	b.mu.RLock()
	if u := b.users[uid]; u == nil || u.status != wire.UserActive {
		b.mu.RUnlock()
		reason := wire.EvictInvalidCredentials
		if tok != nil {
			reason = wire.EvictInvalidToken
			if u != nil {
				reason = wire.EvictUserInactive
			}
		}
		b.log.Debug("login refused: the user was deleted or deactivated meanwhile", "conn", c.id, "user_id", uid)
		return reply{evict: reason}
	}
	session := b.commit.Add(1)
	c.mu.Lock()
	c.bound, c.session, c.client, c.userID = true, session, r.h.Client, uid
	c.mu.Unlock()
	b.mu.RUnlock()
	c.authed.Store(true)
	b.loggedIn(c)
	b.events.clientEvent(sysevents.ClientConnected, c, uid, "")
	c.watermark, c.cached = 0, nil
	b.log.Debug("session bound", "conn", c.id, "session", session, "user_id", uid)
	return registerReply(uid, session)
}

// checkCredentials checks a password or token login through the login
// limiter (login_limit.go): it waits out the backoff of the connection's
// address and the username, checks, and records the outcome. It returns
// the user logged in as, or the eviction to answer when the login fails.
func (b *Broker) checkCredentials(c *conn, pw *wire.Register, tok *wire.RegisterPAT) (uint32, reply, bool) {
	keys := []string{addrKey(c.remote)}
	if pw != nil {
		keys = append(keys, userKey(pw.Username))
	}
	att, wait := b.logins.begin(keys...)
	if wait > 0 {
		b.log.Debug("delaying a login after failed ones", "conn", c.id, "remote", c.remote, "delay", wait)
		select {
		case <-b.cfg.clock.After(wait):
		case <-c.gone:
			att.end(loginAbandoned)
			return 0, reply{silent: true, drop: true}, false
		case <-b.ctx.Done():
			att.end(loginAbandoned)
			return 0, reply{silent: true, drop: true}, false
		}
	}
	var uid uint32
	var reason wire.EvictionReason
	var username string
	if pw != nil {
		username = pw.Username
		uid, reason = b.checkPassword(pw.Username, pw.Password)
	} else {
		uid, reason = b.checkToken(tok.Token)
	}
	if reason == 0 {
		att.end(loginSucceeded)
		return uid, reply{}, true
	}
	refused := reply{evict: reason}
	count, warn := att.end(loginFailed)
	b.events.loginFailed(c, tok != nil, username, reason)
	b.log.Debug("login refused", "conn", c.id, "remote", c.remote, "reason", refused.evict, "username", username)
	if warn {
		b.log.Warn("failed logins", "remote", c.remote, "failures", count, "last_username", username,
			"last_reason", refused.evict)
	}
	return 0, refused, false
}

// checkPassword checks a password login: it returns the user's id, or
// InvalidCredentials for a username or password outside 3..50/3..100
// bytes, an unknown user (after a dummy hash, so that it takes as long),
// a wrong password or an inactive user, as upstream's new server does
// (so a login does not tell whether a user exists or is inactive).
func (b *Broker) checkPassword(username, password string) (uint32, wire.EvictionReason) {
	if checkUsername(username) != 0 || checkNewPassword(password) != 0 {
		return 0, wire.EvictInvalidCredentials
	}
	b.mu.RLock()
	u := b.userNamed(username)
	var id uint32
	var stored string
	var active bool
	if u != nil {
		id, stored, active = u.id, u.password, u.status == wire.UserActive
	}
	b.mu.RUnlock()
	if u == nil {
		verifyPassword(dummyHash(), password)
		return 0, wire.EvictInvalidCredentials
	}
	if !b.verified.check(id, stored, password) || !active {
		return 0, wire.EvictInvalidCredentials
	}
	return id, 0
}

// checkToken checks a token login: it returns the token's user, or
// InvalidToken for an unknown or expired token, UserInactive when its
// user is inactive. Tokens are compared as SHA-256 digests in constant
// time.
func (b *Broker) checkToken(token string) (uint32, wire.EvictionReason) {
	h := sha256.Sum256([]byte(token))
	now := nowMicros()
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, u := range b.users {
		for _, p := range u.pats {
			if subtle.ConstantTimeCompare(h[:], p.hash[:]) != 1 {
				continue
			}
			switch {
			case p.expired(now):
				return 0, wire.EvictInvalidToken
			case u.status != wire.UserActive:
				return 0, wire.EvictUserInactive
			}
			return u.id, 0
		}
	}
	return 0, wire.EvictInvalidToken
}

// handleLogout (39, operation 3): unbind and leave every group; the socket
// stays open for a new Register, which must come within LoginTimeout. The
// reply is an empty, unframed ok.
func handleLogout(b *Broker, r *request) reply {
	c := r.c
	if bound, _, _, _ := c.sessionInfo(); bound {
		c.unbind(sysevents.ReasonLogout)
		c.loginBy = time.Now().Add(b.cfg.LoginTimeout)
		b.loggedOut(c)
	}
	return reply{}
}

// unbind ends the connection's session: it leaves every consumer group
// (which rebalances them) and forgets the request-id watermark. It runs
// on the reader goroutine (logout, disconnect); reason (ReasonLogout or
// ReasonClosed) goes to the client.disconnected event of a bound session.
func (c *conn) unbind(reason string) {
	c.mu.Lock()
	groups := c.groups
	client := c.client
	bound, user := c.bound, c.userID
	c.bound, c.session, c.client, c.userID = false, 0, wire.U128{}, 0
	c.groups = map[*group]struct{}{}
	c.mu.Unlock()
	c.watermark, c.cached = 0, nil
	if len(groups) > 0 {
		c.b.leaveAll(client, groups)
	}
	if bound {
		c.b.events.clientEvent(sysevents.ClientDisconnected, c, user, reason)
	}
}
