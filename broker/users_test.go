package broker_test

// Users, permissions and PATs (codes 31-37, 41-43) at the byte level: what
// the Go client checks before sending (lengths, status) is sent here as
// is, so these are the server's own answers. The client-level behaviour is
// in package iggy's users_test.go.

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// createUser creates an active user and returns its details.
func createUser(t testing.TB, c *rawclient.Client, name, pass string, perms *wire.Permissions) wire.UserDetails {
	t.Helper()
	rep := do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: name, Password: pass, Status: wire.UserActive, Permissions: perms})
	return decodeAs[wire.UserDetails](t, ok(t, rep))
}

// loginAs dials and logs in with a password, requiring success.
func loginAs(t testing.TB, addr, name, pass string) *rawclient.Client {
	t.Helper()
	c, err := rawclient.Dial(t.Context(), addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rep, err := c.Login(name, pass)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction, "login as %s evicted", name)
	require.NotZero(t, c.Session)
	return c
}

func TestUserFieldLimits(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	mk := func(name, pass string) *rawclient.Reply {
		return do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: name, Password: pass, Status: wire.UserActive})
	}
	// Pre-commit: nothing hashed, nothing created.
	denied(t, mk("ab", "secret"), wire.ErrInvalidUsername.Code)
	denied(t, mk(strings.Repeat("u", 51), "secret"), wire.ErrInvalidUsername.Code)
	denied(t, mk("", "secret"), wire.ErrInvalidUsername.Code)
	denied(t, mk("abc", "pw"), wire.ErrInvalidPassword.Code)
	denied(t, mk("abc", strings.Repeat("p", 101)), wire.ErrInvalidPassword.Code)
	denied(t, mk("abc", ""), wire.ErrInvalidPassword.Code)
	require.Len(t, decodeAs[wire.UserList](t, ok(t, do(t, c, wire.CmdGetUsers, nil))), 1, "only root")

	// The bounds are accepted.
	shortName := decodeAs[wire.UserDetails](t, ok(t, mk("abc", strings.Repeat("p", 100))))
	longName := strings.Repeat("u", 50)
	decodeAs[wire.UserDetails](t, ok(t, mk(longName, "pw3")))
	committed(t, mk("abc", "other-secret"), wire.ErrUserAlreadyExists.Code)
	committed(t, mk("iggy", "other-secret"), wire.ErrUserAlreadyExists.Code)

	// A status that is neither active nor inactive is undecodable (3).
	body := wire.Marshal(&wire.CreateUser{Username: "st3", Password: "secret", Status: wire.UserActive})
	body[len(body)-2] = 3
	denied(t, do(t, c, wire.CmdCreateUser, body), wire.ErrInvalidCommand.Code)

	// Renames: the same limits, a taken name is 46, one's own name is fine.
	rename := func(user wire.Identifier, name string) *rawclient.Reply {
		return do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: user, Username: &name})
	}
	abc := wire.NumericID(shortName.ID)
	denied(t, rename(abc, "ab"), wire.ErrInvalidUsername.Code)
	denied(t, rename(abc, strings.Repeat("u", 51)), wire.ErrInvalidUsername.Code)
	committed(t, rename(abc, longName), wire.ErrUserAlreadyExists.Code)
	committed(t, rename(abc, "iggy"), wire.ErrUserAlreadyExists.Code)
	ok(t, rename(abc, "abc"))
	ok(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: abc})) // nothing to change: a no-op commit

	// Password changes: both lengths are checked (44) before the current
	// password (the committed 42).
	change := func(cur, next string) *rawclient.Reply {
		return do(t, c, wire.CmdChangePassword, &wire.ChangePassword{User: wire.NamedID(longName), CurrentPassword: cur, NewPass: next})
	}
	denied(t, change("pw3", "pw"), wire.ErrInvalidPassword.Code)
	denied(t, change("pw3", strings.Repeat("p", 101)), wire.ErrInvalidPassword.Code)
	denied(t, change("pw", "new-secret"), wire.ErrInvalidPassword.Code)
	committed(t, change("wrong", "new-secret"), wire.ErrInvalidCredentials.Code)
	ok(t, change("pw3", strings.Repeat("p", 100)))
}

func TestMissingUser(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	createUser(t, c, "someone", "secret", nil)
	for _, missing := range []wire.Identifier{wire.NumericID(77), wire.NamedID("nobody")} {
		committed(t, do(t, c, wire.CmdDeleteUser, &wire.UserRef{User: missing}), wire.ErrResourceNotFound.Code)
		committed(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: missing, Status: ptr(wire.UserInactive)}), wire.ErrResourceNotFound.Code)
		committed(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: missing, Username: ptr("fresh")}), wire.ErrResourceNotFound.Code)
		committed(t, do(t, c, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: missing, Permissions: wire.AllPermissions()}), wire.ErrResourceNotFound.Code)
		committed(t, do(t, c, wire.CmdChangePassword, &wire.ChangePassword{User: missing, CurrentPassword: "secret", NewPass: "secret2"}), wire.ErrResourceNotFound.Code)
		rep := do(t, c, wire.CmdGetUser, &wire.UserRef{User: missing})
		require.Zero(t, rep.Status())
		require.Empty(t, rep.Body, "get_user of a missing user: status 0, empty body")
	}
	// Root is protected (48, 49), and a user id is never reused.
	committed(t, do(t, c, wire.CmdDeleteUser, &wire.UserRef{User: wire.NumericID(0)}), wire.ErrCannotDeleteUser.Code)
	committed(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID("iggy"), Status: ptr(wire.UserInactive)}), wire.ErrCannotDeleteUser.Code)
	committed(t, do(t, c, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NumericID(0)}), wire.ErrCannotChangePermissions.Code)
	ok(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID("iggy"), Status: ptr(wire.UserActive)}))
	ok(t, do(t, c, wire.CmdDeleteUser, &wire.UserRef{User: wire.NamedID("someone")}))
	again := createUser(t, c, "someone", "secret", nil)
	require.Equal(t, uint32(2), again.ID, "ids are never reused")
}

func TestUserReplyBytes(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	plainRep := ok(t, do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: "plain", Password: "secret", Status: wire.UserInactive}))
	plain := decodeAs[wire.UserDetails](t, plainRep)
	require.Equal(t, wire.UserInactive, plain.Status)
	require.Nil(t, plain.Permissions)
	require.NotZero(t, plain.CreatedAt)

	got := ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("plain")}))
	require.Equal(t, plainRep, got, "create_user and get_user answer the same details")
	require.Equal(t, append(wire.Marshal(&plain.UserInfo), 0, 0, 0, 0), got, "no permissions: the info, then four zero bytes")
	require.True(t, bytes.HasSuffix(got, []byte{0, 0, 0, 0}))
	require.Len(t, got, 4+8+1+1+len("plain")+4)

	perms := &wire.Permissions{Global: wire.GlobalPermissions{ReadTopics: true},
		Streams: map[uint32]*wire.StreamPermissions{3: {SendMessages: true, Topics: map[uint32]*wire.TopicPermissions{1: {ReadTopic: true}}}}}
	rich := createUser(t, c, "rich", "secret", perms)
	require.Equal(t, perms, rich.Permissions)
	got = ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(rich.ID)}))
	blob := perms.AppendTo(nil)
	want := append(wire.Marshal(&rich.UserInfo), 1)
	want = append(append(want, byte(len(blob)), 0, 0, 0), blob...)
	require.Equal(t, want, got, "the info, then [1][len u32][blob]")

	// Root's are every global permission, whatever is stored.
	root := decodeAs[wire.UserDetails](t, ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(0)})))
	require.Equal(t, wire.AllPermissions(), root.Permissions)
	require.Equal(t, "iggy", root.Username)

	// get_users: the infos back to back, by id, without permissions.
	list := ok(t, do(t, c, wire.CmdGetUsers, nil))
	require.Equal(t, append(append(wire.Marshal(&root.UserInfo), wire.Marshal(&plain.UserInfo)...), wire.Marshal(&rich.UserInfo)...), list)

	// Permissions removed: back to the four zero bytes.
	ok(t, do(t, c, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NamedID("rich")}))
	got = ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("rich")}))
	require.Equal(t, append(wire.Marshal(&rich.UserInfo), 0, 0, 0, 0), got)
	// Empty permissions are kept as such, not as none.
	ok(t, do(t, c, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NamedID("rich"), Permissions: &wire.Permissions{}}))
	require.Equal(t, &wire.Permissions{}, decodeAs[wire.UserDetails](t, ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("rich")}))).Permissions)
}

// Newer encoders (upstream's new SDK) write a u32 0 after
// has_permissions=0; the request is served as without it.
func TestCreateUserWithZeroPermissionsLength(t *testing.T) {
	t.Parallel()
	b, c := start(t, brokertest.InMemory())
	body := append(wire.Marshal(&wire.CreateUser{Username: "newer", Password: "secret", Status: wire.UserActive}), 0, 0, 0, 0)
	u := decodeAs[wire.UserDetails](t, ok(t, do(t, c, wire.CmdCreateUser, body)))
	require.Equal(t, "newer", u.Username)
	require.Equal(t, wire.UserActive, u.Status)
	require.Nil(t, u.Permissions)
	got := decodeAs[wire.UserDetails](t, ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("newer")})))
	require.Equal(t, u, got)
	loginAs(t, b.Addr(), "newer", "secret")
}

// A permission denial (41) is pre-commit: it does not use up its request
// id, so the next request with the same id commits; a committed request's
// id is used up (replayed from the cache).
func TestDenialDoesNotUseRequestID(t *testing.T) {
	t.Parallel()
	b, root := start(t, brokertest.InMemory())
	other := createUser(t, root, "other", "secret", nil)
	createUser(t, root, "limited", "secret", nil)
	c := loginAs(t, b.Addr(), "limited", "secret")

	h := c.Header(wire.CmdCreateStream)
	rep, err := c.Exchange(h, bodyOf(&wire.CreateStream{Name: "nope"}))
	require.NoError(t, err)
	denied(t, rep, wire.ErrUnauthorized.Code)

	again := c.Header(wire.CmdCreatePAT)
	again.Request = h.Request
	first, err := c.Exchange(again, bodyOf(&wire.CreatePAT{Name: "mine"}))
	require.NoError(t, err)
	token := decodeAs[wire.CreatePATReply](t, ok(t, first)).Token
	replay, err := c.Exchange(again, bodyOf(&wire.CreatePAT{Name: "other-name"}))
	require.NoError(t, err)
	require.Equal(t, first.Body, replay.Body, "the committed id replays its reply")
	require.Equal(t, token, decodeAs[wire.CreatePATReply](t, ok(t, replay)).Token)
	require.Len(t, decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil))), 1)

	// Denials of the user commands, and the self exemptions.
	denied(t, do(t, c, wire.CmdGetUsers, nil), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(0)}), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(other.ID)}), wire.ErrUnauthorized.Code)
	me := decodeAs[wire.UserDetails](t, ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("limited")})))
	require.Equal(t, "limited", me.Username)
	denied(t, do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: "made", Password: "secret", Status: wire.UserActive}), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdDeleteUser, &wire.UserRef{User: wire.NumericID(other.ID)}), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID("limited"), Username: ptr("bigger")}), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NamedID("limited"), Permissions: wire.AllPermissions()}), wire.ErrUnauthorized.Code)
	denied(t, do(t, c, wire.CmdChangePassword, &wire.ChangePassword{User: wire.NamedID("other"), CurrentPassword: "secret", NewPass: "hijacked"}), wire.ErrUnauthorized.Code)
	ok(t, do(t, c, wire.CmdChangePassword, &wire.ChangePassword{User: wire.NamedID("limited"), CurrentPassword: "secret", NewPass: "secret2"}))
	loginAs(t, b.Addr(), "other", "secret") // untouched

	// read_users lets it read, not change.
	ok(t, do(t, root, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NamedID("limited"),
		Permissions: &wire.Permissions{Global: wire.GlobalPermissions{ReadUsers: true}}}))
	require.Len(t, decodeAs[wire.UserList](t, ok(t, do(t, c, wire.CmdGetUsers, nil))), 3)
	ok(t, do(t, c, wire.CmdGetUser, &wire.UserRef{User: wire.NumericID(0)}))
	h = c.Header(wire.CmdDeleteUser)
	rep, err = c.Exchange(h, bodyOf(&wire.UserRef{User: wire.NamedID("other")}))
	require.NoError(t, err)
	denied(t, rep, wire.ErrUnauthorized.Code)
	// manage_users, granted meanwhile: the same id now commits.
	ok(t, do(t, root, wire.CmdUpdatePermissions, &wire.UpdatePermissions{User: wire.NamedID("limited"),
		Permissions: &wire.Permissions{Global: wire.GlobalPermissions{ManageUsers: true}}}))
	rep, err = c.Exchange(h, bodyOf(&wire.UserRef{User: wire.NamedID("other")}))
	require.NoError(t, err)
	ok(t, rep)
	require.Empty(t, ok(t, do(t, root, wire.CmdGetUser, &wire.UserRef{User: wire.NamedID("other")})))
}

func TestPATLimits(t *testing.T) {
	t.Parallel()
	b, root := start(t, brokertest.InMemory())
	createUser(t, root, "holder", "secret", nil)
	c := loginAs(t, b.Addr(), "holder", "secret")
	mk := func(c *rawclient.Client, name string, expiry uint64) *rawclient.Reply {
		return do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: name, Expiry: expiry})
	}
	denied(t, mk(c, "ab", 0), wire.ErrInvalidPATName.Code)
	denied(t, mk(c, strings.Repeat("n", 31), 0), wire.ErrInvalidPATName.Code)
	denied(t, mk(c, "", 0), wire.ErrInvalidCommand.Code) // an empty name does not decode
	ok(t, mk(c, "abc", 0))
	ok(t, mk(c, strings.Repeat("n", 30), math.MaxUint64))
	ok(t, mk(c, "hour", uint64(time.Hour/time.Microsecond)))
	committed(t, mk(c, "abc", 0), wire.ErrPATAlreadyExists.Code)
	committed(t, mk(c, "end-of-time", math.MaxUint64-1), wire.ErrInvalidPATExpiry.Code)

	list := decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil)))
	require.Len(t, list, 3)
	expiry := map[string]uint64{}
	for _, p := range list {
		expiry[p.Name] = p.Expiry
	}
	require.Zero(t, expiry["abc"], "expiry 0: never")
	require.Zero(t, expiry[strings.Repeat("n", 30)], "expiry u64::MAX: never")
	require.NotZero(t, expiry["hour"])
	require.Greater(t, expiry["hour"], uint64(time.Now().UnixMicro()))

	// 100 per user: the 101st is the committed 52; others' are apart.
	for i := len(list); i < 100; i++ {
		ok(t, mk(c, "tok-"+itoa(uint64(i)), 0))
	}
	committed(t, mk(c, "one-too-many", 0), wire.ErrPATLimitReached.Code)
	committed(t, mk(c, "abc", 0), wire.ErrPATAlreadyExists.Code) // a taken name is 51 even at the limit
	require.Len(t, decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil))), 100)
	ok(t, mk(root, "root-token", 0))
	ok(t, do(t, c, wire.CmdDeletePAT, &wire.DeletePAT{Name: "abc"}))
	ok(t, mk(c, "one-too-many", 0))
	committed(t, mk(c, "two-too-many", 0), wire.ErrPATLimitReached.Code)
}

// readEviction reads the frame a connection gets without asking: the
// eviction of its session, then the close.
func readEviction(t *testing.T, c *rawclient.Client, reason wire.EvictionReason) {
	t.Helper()
	rep, err := c.ReadWithin(10 * time.Second)
	e := evicted(t, c, rep, err, reason)
	require.Equal(t, c.ClientID, e.Client)
}

func TestSessionsOfDeletedOrDeactivatedUsersEnd(t *testing.T) {
	t.Parallel()
	b, root := start(t, brokertest.InMemory())
	createUser(t, root, "doomed", "secret", nil)
	createUser(t, root, "sleepy", "secret", nil)
	createUser(t, root, "bystander", "secret", nil)
	byPassword := loginAs(t, b.Addr(), "doomed", "secret")
	token := decodeAs[wire.CreatePATReply](t, ok(t, do(t, byPassword, wire.CmdCreatePAT, &wire.CreatePAT{Name: "doomed-token"}))).Token
	byToken := dial(t, b)
	rep, err := byToken.LoginPAT(token)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	sleepy := loginAs(t, b.Addr(), "sleepy", "secret")
	bystander := loginAs(t, b.Addr(), "bystander", "secret")

	ok(t, do(t, root, wire.CmdDeleteUser, &wire.UserRef{User: wire.NamedID("doomed")}))
	readEviction(t, byPassword, wire.EvictUserInactive)
	readEviction(t, byToken, wire.EvictUserInactive)

	ok(t, do(t, root, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID("sleepy"), Status: ptr(wire.UserInactive)}))
	readEviction(t, sleepy, wire.EvictUserInactive)

	// Others are served; the deleted user's token is gone, the inactive
	// user's logins fail.
	require.Empty(t, ok(t, do(t, bystander, wire.CmdPing, nil)))
	require.Empty(t, ok(t, do(t, root, wire.CmdPing, nil)))
	d := dial(t, b)
	rep, err = d.LoginPAT(token)
	evicted(t, d, rep, err, wire.EvictInvalidToken)
	d = dial(t, b)
	rep, err = d.Login("sleepy", "secret")
	evicted(t, d, rep, err, wire.EvictInvalidCredentials)
	// A rename or reactivation ends no session.
	ok(t, do(t, root, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID("bystander"), Username: ptr("onlooker"), Status: ptr(wire.UserActive)}))
	require.Empty(t, ok(t, do(t, bystander, wire.CmdPing, nil)))

	// A user that deletes itself gets its reply, then the close.
	createUser(t, root, "selfish", "secret", &wire.Permissions{Global: wire.GlobalPermissions{ManageUsers: true}})
	self := loginAs(t, b.Addr(), "selfish", "secret")
	ok(t, do(t, self, wire.CmdDeleteUser, &wire.UserRef{User: wire.NamedID("selfish")}))
	_, err = self.Read()
	require.Error(t, err, "closed after its reply")
	require.NotErrorIs(t, err, rawclient.ErrTimeout)
}

// A login checking its credentials (argon2id, tens of milliseconds,
// outside the lock) while its user is deactivated or deleted must not
// bind a session after the change ended the user's sessions: it is
// refused, or bound before and evicted. (It used to bind, leaving an
// inactive user a working session.)
func TestLoginRacingDeactivationOrDelete(t *testing.T) {
	t.Parallel()
	b, root := start(t, brokertest.InMemory())
	for i, tc := range []struct {
		deleteUser, token bool
	}{{false, false}, {true, false}, {false, false}, {true, false}, {false, true}, {true, true}} {
		name := "racer-" + itoa(uint64(i))
		createUser(t, root, name, "secret", nil)
		var body []byte
		if tc.token {
			owner := loginAs(t, b.Addr(), name, "secret")
			tok := decodeAs[wire.CreatePATReply](t, ok(t, do(t, owner, wire.CmdCreatePAT, &wire.CreatePAT{Name: "tok"}))).Token
			body = wire.Marshal(&wire.RegisterPAT{ProtocolVersion: wire.ProtocolVersion, SDKName: "t", SDKVersion: "1", Token: tok})
		} else {
			body = wire.Marshal(&wire.Register{ProtocolVersion: wire.ProtocolVersion, SDKName: "t", SDKVersion: "1", Username: name, Password: "secret"})
		}
		c := dial(t, b)
		require.NoError(t, c.Write(wire.RequestHeader{Client: c.ClientID, Operation: wire.OpRegister}, body))
		if tc.deleteUser {
			ok(t, do(t, root, wire.CmdDeleteUser, &wire.UserRef{User: wire.NamedID(name)}))
		} else {
			ok(t, do(t, root, wire.CmdUpdateUser, &wire.UpdateUser{User: wire.NamedID(name), Status: ptr(wire.UserInactive)}))
		}
		rep, err := c.Read()
		require.NoError(t, err)
		if rep.Eviction != nil {
			t.Logf("case %d: login refused: %s", i, rep.Eviction.Reason)
			continue
		}
		payload, code, err := rep.Result()
		require.NoError(t, err)
		require.Zero(t, code)
		c.Session = decodeAs[wire.RegisterReply](t, payload).Session
		// Bound before the change committed: the session must end.
		require.NoError(t, c.Write(c.Header(wire.CmdGetUser), wire.Marshal(&wire.UserRef{User: wire.NamedID(name)})))
		for {
			rep, err := c.Read()
			require.NotErrorIs(t, err, rawclient.ErrTimeout, "case %d: the session of a deactivated or deleted user lives on", i)
			if err != nil {
				break // closed
			}
			if rep.Eviction != nil {
				require.Equal(t, wire.EvictUserInactive, rep.Eviction.Reason)
				break
			}
		}
		t.Logf("case %d: login bound first, then evicted", i)
	}
}
