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
// is Eviction(MalformedLogin); a wrong username/password or one outside
// 3..50/3..100 bytes is Eviction(InvalidCredentials); a token that is
// unknown or expired is Eviction(InvalidToken). Success replies
// [0u32][user_id u32][session u64][protocol u32][server version].
// Password and token checks go through the login limiter
// (login_limit.go), which may delay them.

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// rootUserID is the id of the root user, the broker's only user.
const rootUserID = 0

// pat is a personal access token of the root user; only its hash is kept.
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
	if rep, ok := b.checkCredentials(c, pw, tok); !ok {
		return rep
	}
	session := b.commit.Add(1)
	c.mu.Lock()
	c.bound, c.session, c.client, c.userID = true, session, r.h.Client, rootUserID
	c.mu.Unlock()
	c.authed.Store(true)
	b.loggedIn(c)
	c.watermark, c.cached = 0, nil
	b.log.Debug("session bound", "conn", c.id, "session", session)
	return registerReply(rootUserID, session)
}

// checkCredentials checks a password or token login through the login
// limiter (login_limit.go): it waits out the backoff of the connection's
// address and the username, checks, and records the outcome. It returns
// the eviction to answer when the login fails.
func (b *Broker) checkCredentials(c *conn, pw *wire.Register, tok *wire.RegisterPAT) (reply, bool) {
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
			return reply{silent: true, drop: true}, false
		case <-b.ctx.Done():
			att.end(loginAbandoned)
			return reply{silent: true, drop: true}, false
		}
	}
	var refused reply
	var username string
	switch {
	case pw != nil && !b.checkPassword(pw.Username, pw.Password):
		refused, username = reply{evict: wire.EvictInvalidCredentials}, pw.Username
	case tok != nil && !b.checkToken(tok.Token):
		refused = reply{evict: wire.EvictInvalidToken}
	default:
		att.end(loginSucceeded)
		return reply{}, true
	}
	count, warn := att.end(loginFailed)
	b.log.Debug("login refused", "conn", c.id, "remote", c.remote, "reason", refused.evict, "username", username)
	if warn {
		b.log.Warn("failed logins", "remote", c.remote, "failures", count, "last_username", username,
			"last_reason", refused.evict)
	}
	return refused, false
}

// checkPassword reports whether user and pass are root's credentials.
func (b *Broker) checkPassword(user, pass string) bool {
	if n := len(user); n < 3 || n > 50 {
		return false
	}
	if n := len(pass); n < 3 || n > 100 {
		return false
	}
	u := secretMatches(user, b.rootUserSum)
	p := secretMatches(pass, b.rootPassSum)
	return u && p
}

// secretMatches compares a secret a client sent with the SHA-256 of the
// stored one in constant time: both sides are fixed-length digests, so the
// time depends on neither secret's length or content. It is the one place
// credentials are compared (passwords will move to argon2id here).
func secretMatches(given string, want [sha256.Size]byte) bool {
	got := digest(given)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// digest is what secretMatches compares.
func digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

func (b *Broker) checkToken(token string) bool {
	h := sha256.Sum256([]byte(token))
	now := nowMicros()
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, p := range b.pats {
		if subtle.ConstantTimeCompare(h[:], p.hash[:]) == 1 {
			return !p.expired(now)
		}
	}
	return false
}

// handleLogout (39, operation 3): unbind and leave every group; the socket
// stays open for a new Register, which must come within LoginTimeout. The
// reply is an empty, unframed ok.
func handleLogout(b *Broker, r *request) reply {
	c := r.c
	if bound, _, _, _ := c.sessionInfo(); bound {
		c.unbind()
		c.loginBy = time.Now().Add(b.cfg.LoginTimeout)
		b.loggedOut(c)
	}
	return reply{}
}

// unbind ends the connection's session: it leaves every consumer group
// (which rebalances them) and forgets the request-id watermark. It runs
// on the reader goroutine (logout, disconnect).
func (c *conn) unbind() {
	c.mu.Lock()
	groups := c.groups
	client := c.client
	c.bound, c.session, c.client, c.userID = false, 0, wire.U128{}, 0
	c.groups = map[*group]struct{}{}
	c.mu.Unlock()
	c.watermark, c.cached = 0, nil
	if len(groups) > 0 {
		c.b.leaveAll(client, groups)
	}
}
