package broker

// Personal access tokens of the root user (codes 41-43).
//
// get_personal_access_tokens (41) lists name and expiry (µs since the
// epoch, 0 = never), by name. create (42, op 146) mints a random token
// (32 bytes, base64url), keeps only its SHA-256 and replies
// [0u32][len u8][token]; expiry is a duration in µs from now (0 = never);
// a taken name is the committed 51, an expiry that overflows 56.
// delete (43, op 147) of an unknown name is the committed 20. Login with a
// token (45) is in session.go.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"math"
	"sort"

	"github.com/ferryhq/ferry/iggy/wire"
)

func handleGetPATs(b *Broker, r *request) reply {
	b.mu.RLock()
	defer b.mu.RUnlock()
	list := wire.PATList{}
	for _, p := range b.pats {
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
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return b.writeFailed("create personal access token", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, taken := b.pats[req.Name]; taken {
		return rejected(wire.ErrPATAlreadyExists.Code)
	}
	p := &pat{name: req.Name, hash: sha256.Sum256([]byte(token))}
	if req.Expiry != 0 {
		now := nowMicros()
		if req.Expiry > math.MaxUint64-now {
			return rejected(wire.ErrInvalidPATExpiry.Code)
		}
		p.expiresAt = now + req.Expiry
	}
	b.pats[p.name] = p
	if err := b.saveMeta(); err != nil {
		delete(b.pats, p.name)
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
	p, ok := b.pats[req.Name]
	if !ok {
		return rejected(wire.ErrResourceNotFound.Code)
	}
	delete(b.pats, req.Name)
	if err := b.saveMeta(); err != nil {
		b.pats[req.Name] = p
		return b.writeFailed("delete personal access token", err)
	}
	return okResult(nil)
}
