package broker_test

// Users, permissions and PATs are kept in metadata.json, saved before
// each reply: a kill -9 at any moment keeps every acknowledged change, and
// the change in flight at the kill is either applied or not, nothing
// else. Also plain restarts, a version 1 metadata file, and ResetRoot.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// kUser is what the broker acknowledged of one user.
type kUser struct {
	id       uint32
	name     string
	status   wire.UserStatus
	perms    *wire.Permissions
	password string
	old      string            // the password before the last acknowledged change, "" if none
	changed  bool              // password changed (or user created) since the last check
	pats     map[string]string // name -> token ("" when its reply was lost to the kill)
}

// kOp is one user operation.
type kOp struct {
	kind     string // create, perms, password, rename, status, pat, delete
	id       uint32
	name     string // create: username; rename: the new one; pat: the token's name
	password string // create: the password; password: the new one
	status   wire.UserStatus
	perms    *wire.Permissions
}

func (o *kOp) String() string { return fmt.Sprintf("%s(user %d %q)", o.kind, o.id, o.name) }

// userKillState is the model: the acknowledged users, the deleted ones,
// and the operation in flight at the kill. Only the operations goroutine
// touches it while a child runs, and only the test goroutine after.
type userKillState struct {
	users   map[uint32]*kUser
	gone    map[uint32]*kUser // acknowledged deletes
	pending *kOp
	seq     int
	acked   int
}

func permsKey(p *wire.Permissions) string {
	if p == nil {
		return "none"
	}
	return hex.EncodeToString(p.AppendTo(nil))
}

func randomPerms(rng *rand.Rand) *wire.Permissions {
	if rng.IntN(4) == 0 {
		return nil
	}
	f := func() bool { return rng.IntN(3) == 0 }
	p := &wire.Permissions{Global: wire.GlobalPermissions{ReadServers: f(), ReadUsers: f(), ManageStreams: f(),
		ReadStreams: f(), ReadTopics: f(), PollMessages: f(), SendMessages: f()}}
	for range rng.IntN(3) {
		if p.Streams == nil {
			p.Streams = map[uint32]*wire.StreamPermissions{}
		}
		s := &wire.StreamPermissions{ManageStream: f(), ReadStream: f(), PollMessages: f(), SendMessages: f()}
		for range rng.IntN(3) {
			if s.Topics == nil {
				s.Topics = map[uint32]*wire.TopicPermissions{}
			}
			s.Topics[rng.Uint32N(4)] = &wire.TopicPermissions{ReadTopic: f(), PollMessages: f(), SendMessages: f()}
		}
		p.Streams[rng.Uint32N(5)] = s
	}
	return p
}

func (st *userKillState) ids() []uint32 {
	ids := make([]uint32, 0, len(st.users))
	for id := range st.users {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// nextOp picks an operation the model says must succeed.
func (st *userKillState) nextOp(rng *rand.Rand) *kOp {
	st.seq++
	ids := st.ids()
	if len(ids) < 2 || (len(ids) < 4 && rng.IntN(4) == 0) {
		status := wire.UserActive
		if rng.IntN(4) == 0 {
			status = wire.UserInactive
		}
		return &kOp{kind: "create", name: fmt.Sprintf("user-%d", st.seq), password: fmt.Sprintf("pw-%d", st.seq),
			status: status, perms: randomPerms(rng)}
	}
	u := st.users[ids[rng.IntN(len(ids))]]
	op := &kOp{id: u.id, name: u.name}
	active := u.status == wire.UserActive
	switch k := rng.IntN(7); {
	case k == 0 && active:
		op.kind, op.password = "password", fmt.Sprintf("pw-%d", st.seq)
	case k == 1:
		op.kind, op.name = "rename", fmt.Sprintf("renamed-%d", st.seq)
	case k == 2:
		op.kind, op.status = "status", wire.UserInactive
		if !active {
			op.status = wire.UserActive
		}
	case k == 3 && active && len(u.pats) < 4:
		op.kind, op.name = "pat", fmt.Sprintf("pat-%d", st.seq)
	case k == 4 && len(ids) > 2:
		op.kind = "delete"
	default:
		op.kind, op.perms = "perms", randomPerms(rng)
	}
	return op
}

// apply records an acknowledged operation.
func (st *userKillState) apply(op *kOp, id uint32, token string) {
	switch op.kind {
	case "create":
		st.users[id] = &kUser{id: id, name: op.name, status: op.status, perms: op.perms, password: op.password,
			changed: true, pats: map[string]string{}}
	case "perms":
		st.users[op.id].perms = op.perms
	case "password":
		u := st.users[op.id]
		u.old, u.password, u.changed = u.password, op.password, true
	case "rename":
		st.users[op.id].name = op.name
	case "status":
		st.users[op.id].status = op.status
	case "pat":
		st.users[op.id].pats[op.name] = token
	case "delete":
		st.gone[op.id] = st.users[op.id]
		delete(st.users, op.id)
	}
	st.acked++
}

// runUserOps runs operations through root (and, for PATs, a session of
// the user) until the broker dies, recording each acknowledged one.
func runUserOps(t *testing.T, addr string, root *rawclient.Client, st *userKillState, rng *rand.Rand) {
	for {
		op := st.nextOp(rng)
		st.pending = op
		var rep *rawclient.Reply
		var err error
		switch op.kind {
		case "create":
			rep, err = root.Do(wire.CmdCreateUser, bodyOf(&wire.CreateUser{Username: op.name, Password: op.password, Status: op.status, Permissions: op.perms}))
		case "perms":
			rep, err = root.Do(wire.CmdUpdatePermissions, bodyOf(&wire.UpdatePermissions{User: wire.NumericID(op.id), Permissions: op.perms}))
		case "password":
			u := st.users[op.id]
			rep, err = root.Do(wire.CmdChangePassword, bodyOf(&wire.ChangePassword{User: wire.NumericID(op.id), CurrentPassword: u.password, NewPass: op.password}))
		case "rename":
			rep, err = root.Do(wire.CmdUpdateUser, bodyOf(&wire.UpdateUser{User: wire.NumericID(op.id), Username: &op.name}))
		case "status":
			rep, err = root.Do(wire.CmdUpdateUser, bodyOf(&wire.UpdateUser{User: wire.NumericID(op.id), Status: &op.status}))
		case "delete":
			rep, err = root.Do(wire.CmdDeleteUser, bodyOf(&wire.UserRef{User: wire.NumericID(op.id)}))
		case "pat":
			u := st.users[op.id]
			var c *rawclient.Client
			if c, err = rawclient.Dial(context.Background(), addr); err != nil {
				return // killed
			}
			rep, err = c.Login(u.name, u.password)
			if err == nil && rep.Eviction == nil {
				rep, err = c.Do(wire.CmdCreatePAT, bodyOf(&wire.CreatePAT{Name: op.name}))
			} else if err == nil {
				t.Errorf("%v: login as %s refused: %v", op, u.name, rep.Eviction.Reason)
			}
			c.Close()
		}
		if err != nil || rep.Eviction != nil {
			return // killed: op may or may not be applied
		}
		payload, code, rerr := rep.Result()
		if rep.Status() != 0 || code != 0 || rerr != nil {
			t.Errorf("%v refused: status %d code %d %v", op, rep.Status(), code, rerr)
			return
		}
		var id uint32
		var token string
		switch op.kind {
		case "create":
			var d wire.UserDetails
			if err := wire.Unmarshal(payload, &d); err != nil {
				t.Errorf("%v: reply: %v", op, err)
				return
			}
			id = d.ID
		case "pat":
			var r wire.CreatePATReply
			if err := wire.Unmarshal(payload, &r); err != nil {
				t.Errorf("%v: reply: %v", op, err)
				return
			}
			token = r.Token
		}
		st.apply(op, id, token)
		st.pending = nil
	}
}

// tryLogin logs in on a new connection: the user id, or the eviction.
func tryLogin(t *testing.T, addr string, login func(*rawclient.Client) (*rawclient.Reply, error)) (*rawclient.Client, uint32, wire.EvictionReason) {
	t.Helper()
	c, err := rawclient.Dial(context.Background(), addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rep, err := login(c)
	require.NoError(t, err)
	if rep.Eviction != nil {
		c.Close()
		return nil, 0, rep.Eviction.Reason
	}
	payload, code, err := rep.Result()
	require.NoError(t, err)
	require.Zero(t, code)
	return c, decodeAs[wire.RegisterReply](t, payload).UserID, 0
}

func byPassword(name, pass string) func(*rawclient.Client) (*rawclient.Reply, error) {
	return func(c *rawclient.Client) (*rawclient.Reply, error) { return c.Login(name, pass) }
}

func byToken(token string) func(*rawclient.Client) (*rawclient.Reply, error) {
	return func(c *rawclient.Client) (*rawclient.Reply, error) { return c.LoginPAT(token) }
}

// refused requires a login to fail with reason, then logs in as root so
// the login limiter's count for this address starts over.
func refused(t *testing.T, addr string, login func(*rawclient.Client) (*rawclient.Reply, error), reason wire.EvictionReason, what string) {
	t.Helper()
	_, _, got := tryLogin(t, addr, login)
	require.Equal(t, reason, got, what)
	clearLoginFailures(t, addr)
}

// clearLoginFailures logs in as root: a success clears the login
// limiter's failures of this address (3 are free, then logins wait).
func clearLoginFailures(t *testing.T, addr string) {
	t.Helper()
	c, _, r := tryLogin(t, addr, byPassword("iggy", "iggy"))
	require.Zero(t, r, "root login")
	c.Close()
}

func getUser(t *testing.T, c *rawclient.Client, id uint32) *wire.UserDetails {
	t.Helper()
	body := ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(id)}))
	if len(body) == 0 {
		return nil
	}
	d := decodeAs[wire.UserDetails](t, body)
	return &d
}

// verifyUsers checks a restarted broker against st, settling the
// operation in flight at the kill to what the broker kept.
func verifyUsers(t *testing.T, addr string, st *userKillState, round int) {
	t.Helper()
	root := openKillClient(t, addr)
	list := decodeAs[wire.UserList](t, ok(t, do(t, root, wire.CmdGetUsers, nil)))
	listed := map[uint32]wire.UserInfo{}
	for _, u := range list {
		listed[u.ID] = u
	}
	require.Equal(t, "iggy", listed[0].Username, "round %d: root", round)

	if op := st.pending; op != nil {
		st.pending = nil
		applied := false
		switch op.kind {
		case "create":
			for _, u := range list {
				if u.Username == op.name {
					st.apply(op, u.ID, "")
					applied = true
				}
			}
		case "delete":
			if _, ok := listed[op.id]; !ok {
				st.apply(op, 0, "")
				applied = true
			}
		case "rename":
			if listed[op.id].Username == op.name {
				st.apply(op, 0, "")
				applied = true
			}
		case "status":
			if listed[op.id].Status == op.status {
				st.apply(op, 0, "")
				applied = true
			}
		case "perms":
			if d := getUser(t, root, op.id); d != nil && permsKey(d.Permissions) == permsKey(op.perms) &&
				permsKey(op.perms) != permsKey(st.users[op.id].perms) {
				st.apply(op, 0, "")
				applied = true
			}
		case "password":
			u := st.users[op.id]
			if c, _, r := tryLogin(t, addr, byPassword(u.name, op.password)); r == 0 {
				c.Close()
				st.apply(op, 0, "")
				applied = true
			} else {
				require.Equal(t, wire.EvictInvalidCredentials, r, "round %d: %s's new password", round, u.name)
				clearLoginFailures(t, addr)
			}
		case "pat":
			u := st.users[op.id]
			c, _, r := tryLogin(t, addr, byPassword(u.name, u.password))
			require.Zero(t, r, "round %d: login as %s", round, u.name)
			for _, p := range decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil))) {
				if p.Name == op.name {
					st.apply(op, 0, "")
					applied = true
				}
			}
			c.Close()
		}
		t.Logf("round %d: %v was in flight at the kill; applied: %v", round, op, applied)
	}

	for id, info := range listed {
		if id == 0 {
			continue
		}
		_, known := st.users[id]
		require.True(t, known, "round %d: user %d (%s) exists but its creation was not acknowledged (or its deletion was)", round, id, info.Username)
	}
	for _, id := range st.ids() {
		u := st.users[id]
		info, found := listed[id]
		require.True(t, found, "round %d: acknowledged user %d (%s) is gone", round, id, u.name)
		require.Equal(t, u.name, info.Username, "round %d: user %d name", round, id)
		require.Equal(t, u.status, info.Status, "round %d: user %d status", round, id)
		d := getUser(t, root, id)
		require.NotNil(t, d)
		require.Equal(t, permsKey(u.perms), permsKey(d.Permissions), "round %d: user %d permissions", round, id)
	}
	for id, u := range st.gone {
		_, found := listed[id]
		require.False(t, found, "round %d: deleted user %d (%s) is back", round, id, u.name)
		require.Nil(t, getUser(t, root, id))
	}

	// Credentials: passwords of active users (and their former ones just
	// changed), their PATs; inactive users' logins fail, their tokens
	// name the reason; a deleted user's tokens are unknown.
	for _, id := range st.ids() {
		u := st.users[id]
		if u.status != wire.UserActive {
			if u.changed {
				refused(t, addr, byPassword(u.name, u.password), wire.EvictInvalidCredentials, fmt.Sprintf("inactive %s", u.name))
				u.changed = false // its password is checked once it is active again
			}
			for name, tok := range u.pats {
				if tok != "" {
					refused(t, addr, byToken(tok), wire.EvictUserInactive, fmt.Sprintf("token %s of inactive %s", name, u.name))
				}
			}
			continue
		}
		if u.old != "" && u.changed {
			refused(t, addr, byPassword(u.name, u.old), wire.EvictInvalidCredentials, fmt.Sprintf("%s's former password", u.name))
		}
		c, uid, r := tryLogin(t, addr, byPassword(u.name, u.password))
		require.Zero(t, r, "round %d: %s's password", round, u.name)
		require.Equal(t, id, uid)
		u.changed = false
		var names []string
		for _, p := range decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil))) {
			names = append(names, p.Name)
		}
		c.Close()
		var want []string
		for name, tok := range u.pats {
			want = append(want, name)
			if tok != "" {
				tc, tuid, r := tryLogin(t, addr, byToken(tok))
				require.Zero(t, r, "round %d: token %s of %s", round, name, u.name)
				require.Equal(t, id, tuid)
				tc.Close()
			}
		}
		sort.Strings(want)
		require.Equal(t, want, names, "round %d: %s's tokens", round, u.name)
	}
	for _, u := range st.gone {
		for name, tok := range u.pats {
			if tok != "" {
				refused(t, addr, byToken(tok), wire.EvictInvalidToken, fmt.Sprintf("token %s of deleted %s", name, u.name))
			}
		}
		u.pats = nil // checked once
	}
	t.Logf("round %d: %d users, %d deleted, %d changes acknowledged so far", round, len(st.users), len(st.gone), st.acked)
}

// The broker is SIGKILLed at random moments while users, permissions,
// passwords and PATs change; after each restart every acknowledged change
// is there and the one in flight is applied or not.
func TestUsersKillLoop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts a broker process several times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>9))
	dir := t.TempDir()
	st := &userKillState{users: map[uint32]*kUser{}, gone: map[uint32]*kUser{}}
	const rounds = 6
	for round := 0; round < rounds; round++ {
		addr, kill := startChildBroker(t, dir, "always")
		if round > 0 {
			verifyUsers(t, addr, st, round)
		}
		root := openKillClient(t, addr)
		done := make(chan struct{})
		opsRng := rand.New(rand.NewPCG(seed+uint64(round), 3))
		go func() {
			defer close(done)
			runUserOps(t, addr, root, st, opsRng)
		}()
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		kill()
		<-done
		if t.Failed() {
			return
		}
	}
	b := brokertest.Start(t, brokertest.DataDir(dir))
	verifyUsers(t, b.Addr(), st, rounds)
	require.NotZero(t, st.acked, "no change was acknowledged in the whole run")
}

// Users, permissions, PATs and a changed root password survive a clean
// restart, byte for byte; user ids continue.
func TestUsersSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	perms := &wire.Permissions{Global: wire.GlobalPermissions{ReadStreams: true},
		Streams: map[uint32]*wire.StreamPermissions{2: {PollMessages: true, Topics: map[uint32]*wire.TopicPermissions{1: {SendMessages: true}}}}}
	app := createUser(t, c, "app", "app-secret", perms)
	ok(t, do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: "idle", Password: "idle-secret", Status: wire.UserInactive}))
	gone := createUser(t, c, "gone", "gone-secret", nil)
	ok(t, do(t, c, wire.CmdDeleteUser, &wire.UserRef{User: wire.NamedID("gone")}))
	ac := loginAs(t, b1.Addr(), "app", "app-secret")
	appToken := decodeAs[wire.CreatePATReply](t, ok(t, do(t, ac, wire.CmdCreatePAT, &wire.CreatePAT{Name: "app-token"}))).Token
	ok(t, do(t, ac, wire.CmdCreatePAT, &wire.CreatePAT{Name: "app-hour", Expiry: uint64(time.Hour / time.Microsecond)}))
	rootToken := decodeAs[wire.CreatePATReply](t, ok(t, do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: "root-token"}))).Token
	ok(t, do(t, c, wire.CmdChangePassword, &wire.ChangePassword{User: wire.NamedID("iggy"), CurrentPassword: "iggy", NewPass: "root-secret"}))

	snapshot := func(c, ac *rawclient.Client) map[string][]byte {
		out := map[string][]byte{
			"users":     ok(t, do(t, c, wire.CmdGetUsers, nil)),
			"root pats": ok(t, do(t, c, wire.CmdGetPATs, nil)),
			"app pats":  ok(t, do(t, ac, wire.CmdGetPATs, nil)),
		}
		for _, name := range []string{"iggy", "app", "idle"} {
			out[name] = ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID(name)}))
		}
		return out
	}
	before := snapshot(c, ac)
	require.NoError(t, b1.Close())
	info, err := os.Stat(filepath.Join(dir, "metadata.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "metadata.json holds hashes")

	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	d := dial(t, b2)
	rep, err := d.Login("iggy", "iggy")
	evicted(t, d, rep, err, wire.EvictInvalidCredentials)
	c2 := loginAs(t, b2.Addr(), "iggy", "root-secret")
	ac2 := loginAs(t, b2.Addr(), "app", "app-secret")
	after := snapshot(c2, ac2)
	for k := range before {
		require.Equal(t, before[k], after[k], "%s after the restart", k)
	}
	require.Equal(t, perms, decodeAs[wire.UserDetails](t, after["app"]).Permissions)

	_, uid, r := tryLogin(t, b2.Addr(), byToken(appToken))
	require.Zero(t, r)
	require.Equal(t, app.ID, uid)
	_, uid, r = tryLogin(t, b2.Addr(), byToken(rootToken))
	require.Zero(t, r)
	require.Zero(t, uid)
	d = dial(t, b2)
	rep, err = d.Login("idle", "idle-secret")
	evicted(t, d, rep, err, wire.EvictInvalidCredentials)
	d = dial(t, b2)
	rep, err = d.Login("gone", "gone-secret")
	evicted(t, d, rep, err, wire.EvictInvalidCredentials)

	next := createUser(t, c2, "next", "next-secret", nil)
	require.Equal(t, gone.ID+1, next.ID, "ids continue past the deleted one")
}

func writeMetadata(t *testing.T, dir string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "metadata.json"), data, 0o600))
}

// Version 1 had no users and its PATs were root's: it loads with root made
// from the configured credentials, owning those PATs, and is rewritten as
// version 2.
func TestMetadataVersion1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := "an-old-token-from-version-1"
	sum := sha256.Sum256([]byte(token))
	writeMetadata(t, dir, map[string]any{
		"version": 1, "next_uid": 1, "streams": []any{},
		"personal_access_tokens": []any{map[string]any{"name": "old", "sha256": hex.EncodeToString(sum[:]), "expires_at": 0}},
	})
	creds := brokertest.Config(func(c *broker.Config) { c.RootUsername, c.RootPassword = "admin", "admin-secret" })
	b := brokertest.Start(t, brokertest.DataDir(dir), creds)
	c := loginAs(t, b.Addr(), "admin", "admin-secret")
	root := getUser(t, c, 0)
	require.NotNil(t, root)
	require.Equal(t, "admin", root.Username)
	require.Equal(t, wire.UserActive, root.Status)
	require.Len(t, decodeAs[wire.UserList](t, ok(t, do(t, c, wire.CmdGetUsers, nil))), 1)
	pats := decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil)))
	require.Equal(t, wire.PATList{{Name: "old", Expiry: 0}}, pats)
	_, uid, r := tryLogin(t, b.Addr(), byToken(token))
	require.Zero(t, r, "the version 1 token logs in")
	require.Zero(t, uid, "as root")
	d := dial(t, b)
	rep, err := d.Login("iggy", "iggy")
	evicted(t, d, rep, err, wire.EvictInvalidCredentials)

	// Rewritten as version 2, the token with root.
	data, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	require.NoError(t, err)
	var m struct {
		Version    int               `json:"version"`
		NextUserID uint32            `json:"next_user_id"`
		PATs       []json.RawMessage `json:"personal_access_tokens"`
		Users      []struct {
			ID       uint32 `json:"id"`
			Username string `json:"username"`
			PATs     []struct {
				Name   string `json:"name"`
				SHA256 string `json:"sha256"`
			} `json:"personal_access_tokens"`
		} `json:"users"`
	}
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, 2, m.Version)
	require.Empty(t, m.PATs)
	require.Equal(t, uint32(1), m.NextUserID)
	require.Len(t, m.Users, 1)
	require.Equal(t, "admin", m.Users[0].Username)
	require.Len(t, m.Users[0].PATs, 1)
	require.Equal(t, hex.EncodeToString(sum[:]), m.Users[0].PATs[0].SHA256)

	// The next start keeps it all, whatever the configured credentials.
	require.NoError(t, b.Close())
	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	loginAs(t, b2.Addr(), "admin", "admin-secret")
	_, uid, r = tryLogin(t, b2.Addr(), byToken(token))
	require.Zero(t, r)
	require.Zero(t, uid)
}

// A restart with other root credentials keeps the stored ones unless
// ResetRoot says the configuration owns them.
func TestResetRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	createUser(t, c, "other", "other-secret", nil)
	token := decodeAs[wire.CreatePATReply](t, ok(t, do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: "root-token"}))).Token
	require.NoError(t, b1.Close())

	boss := func(reset bool) brokertest.Option {
		return brokertest.Config(func(c *broker.Config) {
			c.RootUsername, c.RootPassword, c.ResetRoot = "boss", "boss-secret", reset
		})
	}
	refusedOn := func(b *broker.Broker, name, pass string) {
		t.Helper()
		d := dial(t, b)
		rep, err := d.Login(name, pass)
		evicted(t, d, rep, err, wire.EvictInvalidCredentials)
	}

	b2 := brokertest.Start(t, brokertest.DataDir(dir), boss(false))
	loginAs(t, b2.Addr(), "iggy", "iggy")
	refusedOn(b2, "boss", "boss-secret")
	require.NoError(t, b2.Close())

	b3 := brokertest.Start(t, brokertest.DataDir(dir), boss(true))
	c3 := loginAs(t, b3.Addr(), "boss", "boss-secret")
	refusedOn(b3, "iggy", "iggy")
	root := getUser(t, c3, 0)
	require.Equal(t, "boss", root.Username)
	require.Len(t, decodeAs[wire.UserList](t, ok(t, do(t, c3, wire.CmdGetUsers, nil))), 2)
	loginAs(t, b3.Addr(), "other", "other-secret")
	_, uid, r := tryLogin(t, b3.Addr(), byToken(token))
	require.Zero(t, r, "root's tokens stay")
	require.Zero(t, uid)
	require.NoError(t, b3.Close())

	// The same credentials again: nothing to change, nothing rewritten.
	meta := filepath.Join(dir, "metadata.json")
	saved, err := os.ReadFile(meta)
	require.NoError(t, err)
	b4 := brokertest.Start(t, brokertest.DataDir(dir), boss(true))
	loginAs(t, b4.Addr(), "boss", "boss-secret")
	require.NoError(t, b4.Close())
	again, err := os.ReadFile(meta)
	require.NoError(t, err)
	require.Equal(t, string(saved), string(again))

	// A root name another user holds is refused at start, and the data
	// directory stays usable.
	_, err = broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir,
		RootUsername: "other", RootPassword: "whatever", ResetRoot: true})
	require.ErrorContains(t, err, "belongs to user")
	b5 := brokertest.Start(t, brokertest.DataDir(dir))
	loginAs(t, b5.Addr(), "boss", "boss-secret")
}

// A hand-edited metadata.json whose permissions hold a null stream or
// topic is refused at start, like other damage, instead of failing every
// get_user of that user later.
func TestMetadataNullPermissionsRefused(t *testing.T) {
	t.Parallel()
	for _, perms := range []string{
		`{"global": {}, "streams": {"1": null}}`,
		`{"global": {}, "streams": {"1": {"topics": {"2": null}}}}`,
	} {
		dir := t.TempDir()
		b := brokertest.Start(t, brokertest.DataDir(dir))
		createUser(t, login(t, b), "app", "app-secret", &wire.Permissions{Global: wire.GlobalPermissions{ReadStreams: true}})
		require.NoError(t, b.Close())
		path := filepath.Join(dir, "metadata.json")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m))
		m["users"].([]any)[1].(map[string]any)["permissions"] = json.RawMessage(perms)
		writeMetadata(t, dir, m)
		_, err = broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir})
		require.Error(t, err, perms)
		require.ErrorContains(t, err, "metadata", perms)
	}
}
