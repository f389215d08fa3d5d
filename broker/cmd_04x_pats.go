package broker

// Personal access tokens (codes 41-43) of the session's user: each user
// has its own, a name is unique per user, and a token logs in as its user
// with that user's rights (login with a token, 45, is in session.go).
//
// get_personal_access_tokens (41) lists name and expiry (µs since the
// epoch, 0 = never), by name. create (42, op 146) checks the name
// (3..30 bytes, else 50) and the user's count (100, else the committed
// 52), mints a random token (50 bytes, as upstream, in URL-safe base64
// without padding, 67 characters, so that it can stand in a connection
// string unescaped; upstream's standard base64 cannot), keeps only its
// SHA-256 and replies [0u32][len u8][token];
// expiry is a duration in µs from now, 0 (the server default) and
// u64::MAX mean never; a taken name is the committed 51, an expiry past
// the end of time 56. delete (43, op 147) of an unknown name is the
// committed 20.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"math"
	"sort"

	"github.com/ferryhq/ferry/iggy/wire"
)

const patBytes = 50

// sessionUser returns the user of r's session, or nil when it was
// deleted. Caller holds b.mu.
func (b *Broker) sessionUser(r *request) *user {
	_, _, _, uid := r.c.sessionInfo()
	return b.users[uid]
}

func handleGetPATs(b *Broker, r *request) reply {
	b.mu.RLock()
	defer b.mu.RUnlock()
	u := b.sessionUser(r)
	if u == nil {
		return status(wire.ErrUnauthorized.Code)
	}
	list := wire.PATList{}
	for _, p := range u.pats {
		list = append(list, wire.PATInfo{Name: p.name, Expiry: p.expiresAt})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return rawOf(&list)
}

func handleCreatePAT(b *Broker, r *request) reply {
	var req wire.CreatePAT
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if n := len(req.Name); n < minPATNameLen || n > maxPATNameLen {
		return status(wire.ErrInvalidPATName.Code)
	}
	var raw [patBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return b.writeFailed("create personal access token", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.sessionUser(r)
	switch {
	case u == nil:
		return status(wire.ErrUnauthorized.Code)
	case u.pats[req.Name] != nil:
		return rejected(wire.ErrPATAlreadyExists.Code)
	case len(u.pats) >= maxPATsPerUser:
		return rejected(wire.ErrPATLimitReached.Code)
	}
	p := &pat{name: req.Name, hash: sha256.Sum256([]byte(token))}
	if req.Expiry != 0 && req.Expiry != math.MaxUint64 {
		now := nowMicros()
		if req.Expiry > math.MaxUint64-now {
			return rejected(wire.ErrInvalidPATExpiry.Code)
		}
		p.expiresAt = now + req.Expiry
	}
	u.pats[p.name] = p
	if err := b.saveMeta(); err != nil {
		delete(u.pats, p.name)
		return b.writeFailed("create personal access token", err)
	}
	return okResult(&wire.CreatePATReply{Token: token})
}

func handleDeletePAT(b *Broker, r *request) reply {
	var req wire.DeletePAT
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.sessionUser(r)
	if u == nil {
		return status(wire.ErrUnauthorized.Code)
	}
	p, ok := u.pats[req.Name]
	if !ok {
		return rejected(wire.ErrResourceNotFound.Code)
	}
	delete(u.pats, req.Name)
	if err := b.saveMeta(); err != nil {
		u.pats[req.Name] = p
		return b.writeFailed("delete personal access token", err)
	}
	return okResult(nil)
}
