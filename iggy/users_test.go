package iggy_test

// Users and permissions through the client, against the broker (issue
// 12): every user command, every permission flag given alone against
// every kind of command (so each flag is also withheld from every command
// it does not grant), scope (a stream's or topic's rights do not reach
// another), deactivated and deleted users with live sessions, a limited
// user's PAT, and root's protection.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// dialAs logs in as username/password and closes the client at the end.
func dialAs(t testing.TB, addr, username, password string) *iggy.Client {
	t.Helper()
	c, err := iggy.Dial(testCtx(t), addr, iggy.WithCredentials(username, password))
	require.NoError(t, err, "login as %s", username)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestUserCommands(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)

	perms := &iggy.Permissions{
		Global: iggy.GlobalPermissions{ReadStreams: true},
		Streams: map[uint32]*iggy.StreamPermissions{7: {PollMessages: true,
			Topics: map[uint32]*iggy.TopicPermissions{3: {SendMessages: true}}}},
	}
	u, err := root.CreateUser(ctx, "app", "app-secret", iggy.UserActive, perms)
	require.NoError(t, err)
	require.Equal(t, "app", u.Username)
	require.Equal(t, iggy.UserActive, u.Status)
	require.NotZero(t, u.ID, "root is 0")
	require.NotZero(t, u.CreatedAt)
	require.Equal(t, perms, u.Permissions)

	_, err = root.CreateUser(ctx, "app", "other-secret", iggy.UserActive, nil)
	requireIggyError(t, err, wire.CmdCreateUser, iggy.ErrUserAlreadyExists)

	for _, id := range []iggy.Identifier{iggy.NumericID(u.ID), iggy.NamedID("app")} {
		got, err := root.GetUser(ctx, id)
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
	_, err = root.GetUser(ctx, iggy.NamedID("nobody"))
	requireIggyError(t, err, wire.CmdGetUser, iggy.ErrUserNotFound)

	rootInfo, err := root.GetUser(ctx, iggy.NumericID(0))
	require.NoError(t, err)
	require.Equal(t, "iggy", rootInfo.Username)
	require.Equal(t, wire.AllPermissions(), rootInfo.Permissions, "root holds every global permission")

	list, err := root.ListUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"iggy", "app"}, []string{list[0].Username, list[1].Username})

	// Rename, then a name taken by another user.
	require.NoError(t, root.UpdateUser(ctx, iggy.NamedID("app"), "connector", 0))
	err = root.UpdateUser(ctx, iggy.NamedID("connector"), "iggy", 0)
	requireIggyError(t, err, wire.CmdUpdateUser, iggy.ErrUserAlreadyExists)
	err = root.UpdateUser(ctx, iggy.NamedID("app"), "x-app", 0)
	requireIggyError(t, err, wire.CmdUpdateUser, iggy.ErrUserNotFound)

	// Permissions replaced, then removed.
	none := &iggy.Permissions{Global: iggy.GlobalPermissions{SendMessages: true}}
	require.NoError(t, root.UpdatePermissions(ctx, iggy.NumericID(u.ID), none))
	got, err := root.GetUser(ctx, iggy.NumericID(u.ID))
	require.NoError(t, err)
	require.Equal(t, none, got.Permissions)
	require.NoError(t, root.UpdatePermissions(ctx, iggy.NumericID(u.ID), nil))
	got, err = root.GetUser(ctx, iggy.NumericID(u.ID))
	require.NoError(t, err)
	require.Nil(t, got.Permissions)

	// Passwords: the current one must match; then only the new one logs in.
	err = root.ChangePassword(ctx, iggy.NamedID("connector"), "wrong-secret", "new-secret")
	requireIggyError(t, err, wire.CmdChangePassword, iggy.ErrInvalidCredentials)
	dialAs(t, b.Addr(), "connector", "app-secret")
	require.NoError(t, root.ChangePassword(ctx, iggy.NamedID("connector"), "app-secret", "new-secret"))
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("connector", "app-secret"))
	require.ErrorIs(t, err, iggy.ErrInvalidCredentials)
	self := dialAs(t, b.Addr(), "connector", "new-secret")
	// A user changes its own password without manage_users.
	require.NoError(t, self.ChangePassword(ctx, iggy.NamedID("connector"), "new-secret", "own-secret"))
	dialAs(t, b.Addr(), "connector", "own-secret")

	// The client checks lengths before sending (the server's own checks
	// are in package broker's tests).
	_, err = root.CreateUser(ctx, "ab", "secret", iggy.UserActive, nil)
	require.ErrorIs(t, err, iggy.ErrInvalidUsername)
	_, err = root.CreateUser(ctx, "abc", "pw", iggy.UserActive, nil)
	require.ErrorIs(t, err, iggy.ErrInvalidPassword)

	require.NoError(t, root.DeleteUser(ctx, iggy.NamedID("connector")))
	_, err = root.GetUser(ctx, iggy.NumericID(u.ID))
	require.ErrorIs(t, err, iggy.ErrUserNotFound)
	err = root.DeleteUser(ctx, iggy.NamedID("connector"))
	requireIggyError(t, err, wire.CmdDeleteUser, iggy.ErrUserNotFound)

	// Ids are never reused.
	again, err := root.CreateUser(ctx, "app", "app-secret", iggy.UserInactive, nil)
	require.NoError(t, err)
	require.Greater(t, again.ID, u.ID)
	require.Equal(t, iggy.UserInactive, again.Status)
}

func TestRootIsProtected(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	for _, id := range []iggy.Identifier{iggy.NumericID(0), iggy.NamedID("iggy")} {
		requireIggyError(t, root.DeleteUser(ctx, id), wire.CmdDeleteUser, iggy.ErrCannotDeleteUser)
		requireIggyError(t, root.UpdatePermissions(ctx, id, &iggy.Permissions{}), wire.CmdUpdatePermissions, iggy.ErrCannotChangePermissions)
		requireIggyError(t, root.UpdateUser(ctx, id, "", iggy.UserInactive), wire.CmdUpdateUser, iggy.ErrCannotDeleteUser)
	}
	// A user with manage_users cannot either.
	_, err := root.CreateUser(ctx, "admin", "admin-secret", iggy.UserActive,
		&iggy.Permissions{Global: iggy.GlobalPermissions{ManageUsers: true, ReadUsers: true}})
	require.NoError(t, err)
	admin := dialAs(t, b.Addr(), "admin", "admin-secret")
	requireIggyError(t, admin.DeleteUser(ctx, iggy.NumericID(0)), wire.CmdDeleteUser, iggy.ErrCannotDeleteUser)
	requireIggyError(t, admin.UpdatePermissions(ctx, iggy.NumericID(0), nil), wire.CmdUpdatePermissions, iggy.ErrCannotChangePermissions)
	// Changing root's password needs root's current one.
	err = admin.ChangePassword(ctx, iggy.NumericID(0), "guess-secret", "mine-now")
	requireIggyError(t, err, wire.CmdChangePassword, iggy.ErrInvalidCredentials)
	dialAs(t, b.Addr(), "iggy", "iggy")
	// Renaming root is allowed, as upstream allows it; it stays root.
	require.NoError(t, root.UpdateUser(ctx, iggy.NumericID(0), "admin-root", 0))
	renamed := dialAs(t, b.Addr(), "admin-root", "iggy")
	_, err = renamed.CreateStream(ctx, "still-root")
	require.NoError(t, err)
}

// flag is one permission, given alone to a user.
type flag struct {
	name string
	set  func(p *iggy.Permissions, s, t uint32)
}

func globalFlag(name string, f func(g *iggy.GlobalPermissions)) flag {
	return flag{"G." + name, func(p *iggy.Permissions, _, _ uint32) { f(&p.Global) }}
}

func streamFlag(name string, f func(s *iggy.StreamPermissions)) flag {
	return flag{"S." + name, func(p *iggy.Permissions, s, _ uint32) {
		sp := &iggy.StreamPermissions{}
		f(sp)
		p.Streams = map[uint32]*iggy.StreamPermissions{s: sp}
	}}
}

func topicFlag(name string, f func(t *iggy.TopicPermissions)) flag {
	return flag{"T." + name, func(p *iggy.Permissions, s, t uint32) {
		tp := &iggy.TopicPermissions{}
		f(tp)
		p.Streams = map[uint32]*iggy.StreamPermissions{s: {Topics: map[uint32]*iggy.TopicPermissions{t: tp}}}
	}}
}

var allFlags = []flag{
	globalFlag("manage_servers", func(g *iggy.GlobalPermissions) { g.ManageServers = true }),
	globalFlag("read_servers", func(g *iggy.GlobalPermissions) { g.ReadServers = true }),
	globalFlag("manage_users", func(g *iggy.GlobalPermissions) { g.ManageUsers = true }),
	globalFlag("read_users", func(g *iggy.GlobalPermissions) { g.ReadUsers = true }),
	globalFlag("manage_streams", func(g *iggy.GlobalPermissions) { g.ManageStreams = true }),
	globalFlag("read_streams", func(g *iggy.GlobalPermissions) { g.ReadStreams = true }),
	globalFlag("manage_topics", func(g *iggy.GlobalPermissions) { g.ManageTopics = true }),
	globalFlag("read_topics", func(g *iggy.GlobalPermissions) { g.ReadTopics = true }),
	globalFlag("poll_messages", func(g *iggy.GlobalPermissions) { g.PollMessages = true }),
	globalFlag("send_messages", func(g *iggy.GlobalPermissions) { g.SendMessages = true }),
	streamFlag("manage_stream", func(s *iggy.StreamPermissions) { s.ManageStream = true }),
	streamFlag("read_stream", func(s *iggy.StreamPermissions) { s.ReadStream = true }),
	streamFlag("manage_topics", func(s *iggy.StreamPermissions) { s.ManageTopics = true }),
	streamFlag("read_topics", func(s *iggy.StreamPermissions) { s.ReadTopics = true }),
	streamFlag("poll_messages", func(s *iggy.StreamPermissions) { s.PollMessages = true }),
	streamFlag("send_messages", func(s *iggy.StreamPermissions) { s.SendMessages = true }),
	topicFlag("manage_topic", func(t *iggy.TopicPermissions) { t.ManageTopic = true }),
	topicFlag("read_topic", func(t *iggy.TopicPermissions) { t.ReadTopic = true }),
	topicFlag("poll_messages", func(t *iggy.TopicPermissions) { t.PollMessages = true }),
	topicFlag("send_messages", func(t *iggy.TopicPermissions) { t.SendMessages = true }),
}

// permOp is a command run by a user holding one flag, with the flags that
// grant it (upstream's permissioner rules, restated from its source).
type permOp struct {
	name   string
	run    func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error
	grants []string
}

var (
	readTopicGrants = []string{"G.manage_streams", "G.read_streams", "G.manage_topics", "G.read_topics",
		"S.manage_topics", "S.read_topics", "T.manage_topic", "T.read_topic"}
	manageTopicGrants = []string{"G.manage_streams", "G.manage_topics", "S.manage_topics", "T.manage_topic"}
	pollGrants        = []string{"G.poll_messages", "S.poll_messages", "S.read_stream", "S.manage_topics", "S.read_topics",
		"T.poll_messages", "T.read_topic", "T.manage_topic"}
)

var permOps = []permOp{
	{"get_stats", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.Stats(ctx)
		return err
	},
		[]string{"G.manage_servers", "G.read_servers"}},
	{"get_clients", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.ListClients(ctx)
		return err
	},
		[]string{"G.manage_servers", "G.read_servers"}},
	{"get_users", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.ListUsers(ctx)
		return err
	},
		[]string{"G.manage_users", "G.read_users"}},
	{"get_user (root)", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.GetUser(ctx, iggy.NumericID(0))
		return err
	}, []string{"G.manage_users", "G.read_users"}},
	{"create_user", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.CreateUser(ctx, uniqueName("made"), "secret", iggy.UserActive, nil)
		return err
	}, []string{"G.manage_users"}},
	{"get_streams", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.ListStreams(ctx)
		return err
	},
		[]string{"G.manage_streams", "G.read_streams"}},
	{"get_stream", func(ctx context.Context, c *iggy.Client, s, _ iggy.Identifier) error {
		_, err := c.GetStream(ctx, s)
		return err
	},
		[]string{"G.manage_streams", "G.read_streams", "S.manage_stream", "S.read_stream"}},
	{"create_stream", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.CreateStream(ctx, uniqueName("made"))
		return err
	}, []string{"G.manage_streams"}},
	{"update_stream", func(ctx context.Context, c *iggy.Client, s, _ iggy.Identifier) error {
		return c.UpdateStream(ctx, s, "perm-stream")
	}, []string{"G.manage_streams", "S.manage_stream"}},
	{"get_topic", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		_, err := c.GetTopic(ctx, s, t)
		return err
	},
		readTopicGrants},
	{"get_topics", func(ctx context.Context, c *iggy.Client, s, _ iggy.Identifier) error {
		_, err := c.ListTopics(ctx, s)
		return err
	},
		[]string{"G.manage_streams", "G.read_streams", "G.manage_topics", "G.read_topics", "S.manage_topics", "S.read_topics"}},
	{"create_topic", func(ctx context.Context, c *iggy.Client, s, _ iggy.Identifier) error {
		_, err := c.CreateTopic(ctx, s, uniqueName("made"), 1)
		return err
	}, []string{"G.manage_streams", "G.manage_topics", "S.manage_topics"}},
	{"update_topic", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		return c.UpdateTopic(ctx, s, t, "perm-topic")
	}, manageTopicGrants},
	{"create_partitions", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		return c.CreatePartitions(ctx, s, t, 1)
	}, manageTopicGrants},
	{"get_consumer_groups", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		_, err := c.ListConsumerGroups(ctx, s, t)
		return err
	}, readTopicGrants},
	{"join_consumer_group", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		return c.JoinConsumerGroup(ctx, s, t, iggy.NamedID("perm-group"))
	}, readTopicGrants},
	{"poll_messages", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		_, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: t,
			Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1})
		return err
	}, pollGrants},
	{"store_consumer_offset", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		return c.StoreConsumerOffset(ctx, iggy.SingleConsumer(iggy.NumericID(1)), s, t, iggy.Partition(0), 0)
	}, pollGrants},
	{"send_messages", func(ctx context.Context, c *iggy.Client, s, t iggy.Identifier) error {
		_, err := c.SendMessages(ctx, s, t, iggy.ToPartition(0), payloads("p", 1))
		return err
	}, []string{"G.send_messages", "S.send_messages", "S.manage_stream", "S.manage_topics", "T.send_messages", "T.manage_topic"}},
	// Any session may do these.
	{"get_me", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error { _, err := c.Me(ctx); return err }, nil},
	{"get_cluster_metadata", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		_, err := c.ClusterMetadata(ctx)
		return err
	}, nil},
	{"personal access tokens", func(ctx context.Context, c *iggy.Client, _, _ iggy.Identifier) error {
		name := uniqueName("tok")
		if _, err := c.CreatePAT(ctx, name, 0); err != nil {
			return err
		}
		if _, err := c.ListPATs(ctx); err != nil {
			return err
		}
		return c.DeletePAT(ctx, name)
	}, nil},
}

// TestEveryPermissionAloneAgainstEveryCommand gives each of the 20 flags
// alone to a user (and one user none) and runs every command kind: a
// command is allowed exactly when the flag grants it, else it fails with
// Unauthorized, and a denied command changes nothing.
func TestEveryPermissionAloneAgainstEveryCommand(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	st, err := root.CreateStream(ctx, "perm-stream")
	require.NoError(t, err)
	tp, err := root.CreateTopic(ctx, iggy.NumericID(st.ID), "perm-topic", 1)
	require.NoError(t, err)
	s, tt := iggy.NumericID(st.ID), iggy.NumericID(tp.ID)
	_, err = root.CreateConsumerGroup(ctx, s, tt, "perm-group")
	require.NoError(t, err)
	_, err = root.SendMessages(ctx, s, tt, iggy.ToPartition(0), payloads("m", 1)) // offset 0 exists
	require.NoError(t, err)

	users := append([]flag{{"none", func(*iggy.Permissions, uint32, uint32) {}}}, allFlags...)
	for i, f := range users {
		t.Run(f.name, func(t *testing.T) {
			perms := &iggy.Permissions{}
			f.set(perms, st.ID, tp.ID)
			if f.name == "none" {
				perms = nil
			}
			name := fmt.Sprintf("user-%d", i)
			_, err := root.CreateUser(ctx, name, "secret", iggy.UserActive, perms)
			require.NoError(t, err)
			c := dialAs(t, b.Addr(), name, "secret")
			for _, op := range permOps {
				before := streamShape(t, root)
				err := op.run(ctx, c, s, tt)
				if op.grants == nil || slices.Contains(op.grants, f.name) {
					require.NoError(t, err, "%s may run %s", f.name, op.name)
					continue
				}
				require.ErrorIs(t, err, iggy.ErrUnauthorized, "%s may not run %s", f.name, op.name)
				require.Equal(t, before, streamShape(t, root), "a denied %s changed nothing", op.name)
			}
		})
	}
}

// streamShape is what a denied command could have changed: the streams,
// their topics and partition counts, the users.
func streamShape(t *testing.T, root *iggy.Client) []string {
	ctx := testCtx(t)
	var out []string
	streams, err := root.ListStreams(ctx)
	require.NoError(t, err)
	for _, s := range streams {
		d, err := root.GetStream(ctx, iggy.NumericID(s.ID))
		require.NoError(t, err)
		for _, tp := range d.Topics {
			out = append(out, fmt.Sprintf("%s/%s:%d", s.Name, tp.Name, tp.PartitionsCount))
		}
		out = append(out, s.Name)
	}
	users, err := root.ListUsers(ctx)
	require.NoError(t, err)
	for _, u := range users {
		out = append(out, "user "+u.Username)
	}
	return out
}

// TestPermissionsStayInTheirScope: rights on one stream do not reach
// another, rights on one topic do not reach its siblings, and deleting a
// stream or topic drops the rights on it, so a new one that takes its id
// does not inherit them.
func TestPermissionsStayInTheirScope(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	mine, err := root.CreateStream(ctx, "mine")
	require.NoError(t, err)
	other, err := root.CreateStream(ctx, "other")
	require.NoError(t, err)
	for _, s := range []uint32{mine.ID, other.ID} {
		for _, name := range []string{"t0", "t1"} {
			_, err := root.CreateTopic(ctx, iggy.NumericID(s), name, 1)
			require.NoError(t, err)
		}
	}
	perms := &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
		mine.ID: {ReadStream: true, Topics: map[uint32]*iggy.TopicPermissions{0: {SendMessages: true, ReadTopic: true}}},
	}}
	_, err = root.CreateUser(ctx, "scoped", "secret", iggy.UserActive, perms)
	require.NoError(t, err)
	c := dialAs(t, b.Addr(), "scoped", "secret")
	send := func(s, tp string) error {
		_, err := c.SendMessages(ctx, iggy.NamedID(s), iggy.NamedID(tp), iggy.ToPartition(0), payloads("m", 1))
		return err
	}
	require.NoError(t, send("mine", "t0"))
	require.ErrorIs(t, send("mine", "t1"), iggy.ErrUnauthorized, "another topic of the stream")
	require.ErrorIs(t, send("other", "t0"), iggy.ErrUnauthorized, "the same topic id in another stream")
	_, err = c.GetStream(ctx, iggy.NamedID("mine"))
	require.NoError(t, err)
	_, err = c.GetStream(ctx, iggy.NamedID("other"))
	require.ErrorIs(t, err, iggy.ErrUnauthorized)
	// Balanced sends need the partition count; a user that may read the
	// topic resolves it itself, one that may not leaves it to the server.
	_, err = c.SendMessages(ctx, iggy.NamedID("mine"), iggy.NamedID("t0"), iggy.Balanced(), payloads("b", 1))
	require.NoError(t, err)

	// Delete topic t0 of mine and create a new one: it gets id 0 again.
	require.NoError(t, root.DeleteTopic(ctx, iggy.NamedID("mine"), iggy.NamedID("t0")))
	again, err := root.CreateTopic(ctx, iggy.NamedID("mine"), "t0-again", 1)
	require.NoError(t, err)
	require.Equal(t, uint32(0), again.ID, "the id is reused")
	require.ErrorIs(t, send("mine", "t0-again"), iggy.ErrUnauthorized, "rights on the deleted topic are gone")
	got, err := root.GetUser(ctx, iggy.NamedID("scoped"))
	require.NoError(t, err)
	require.Empty(t, got.Permissions.Streams[mine.ID].Topics)
	require.NoError(t, root.DeleteStream(ctx, iggy.NamedID("mine")))
	got, err = root.GetUser(ctx, iggy.NamedID("scoped"))
	require.NoError(t, err)
	require.Empty(t, got.Permissions.Streams, "rights on the deleted stream are gone")
}

// sessionEnds waits until c's next command fails: its session was ended.
func sessionEnds(t *testing.T, c *iggy.Client) error {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = c.Me(ctx)
		return err != nil
	}, 20*time.Second, 20*time.Millisecond)
	return err
}

func TestDeactivatedUser(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	u, err := root.CreateUser(ctx, "worker", "secret", iggy.UserActive, nil)
	require.NoError(t, err)
	live := dialAs(t, b.Addr(), "worker", "secret")
	token, err := live.CreatePAT(ctx, "worker-token", 0)
	require.NoError(t, err)

	require.NoError(t, root.UpdateUser(ctx, iggy.NumericID(u.ID), "", iggy.UserInactive))
	err = sessionEnds(t, live)
	require.True(t, errors.Is(err, iggy.ErrInvalidCredentials) || errors.Is(err, iggy.ErrUnauthenticated) ||
		errors.Is(err, iggy.ErrConnection), "the live session ended: %v", err)

	// Logins fail as a wrong password does (upstream hides inactivity
	// from password logins); its token names the reason.
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("worker", "secret"))
	require.ErrorIs(t, err, iggy.ErrInvalidCredentials)
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	var ev *wire.EvictionError
	require.ErrorAs(t, err, &ev)
	require.Equal(t, wire.EvictUserInactive, ev.Reason)

	require.NoError(t, root.UpdateUser(ctx, iggy.NumericID(u.ID), "", iggy.UserActive))
	dialAs(t, b.Addr(), "worker", "secret")
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	require.NoError(t, err)
}

func TestDeletedUserWithALiveSession(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, root, 1)
	_, err := root.CreateUser(ctx, "gone", "secret", iggy.UserActive,
		&iggy.Permissions{Global: iggy.GlobalPermissions{PollMessages: true, SendMessages: true}})
	require.NoError(t, err)
	live := dialAs(t, b.Addr(), "gone", "secret")
	_, err = live.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("before", 1))
	require.NoError(t, err)

	require.NoError(t, root.DeleteUser(ctx, iggy.NamedID("gone")))
	sessionEnds(t, live)
	_, err = live.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("after", 1))
	require.Error(t, err, "a deleted user's session sends nothing")
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("gone", "secret"))
	require.ErrorIs(t, err, iggy.ErrInvalidCredentials)

	// Only the message sent before the delete is there.
	r, err := root.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(9)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
}

// TestPATOfALimitedUser: a token logs in as its user, with that user's
// rights and no more; a user sees only its own tokens.
func TestPATOfALimitedUser(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	root := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, root, 1)
	st, err := root.GetStream(ctx, s)
	require.NoError(t, err)
	u, err := root.CreateUser(ctx, "sender", "secret", iggy.UserActive, &iggy.Permissions{
		Streams: map[uint32]*iggy.StreamPermissions{st.ID: {SendMessages: true}}})
	require.NoError(t, err)
	_, err = root.CreatePAT(ctx, "root-token", 0)
	require.NoError(t, err)
	sender := dialAs(t, b.Addr(), "sender", "secret")
	token, err := sender.CreatePAT(ctx, "sender-token", time.Hour)
	require.NoError(t, err)
	require.Len(t, token, 67, "50 random bytes, as upstream, in URL-safe base64")
	mine, err := sender.ListPATs(ctx)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "sender-token", mine[0].Name)
	require.NotZero(t, mine[0].Expiry)
	_, err = sender.CreatePAT(ctx, "root-token", 0)
	require.NoError(t, err, "names are per user")

	byToken, err := iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	require.NoError(t, err)
	defer byToken.Close()
	me, err := byToken.Me(ctx)
	require.NoError(t, err)
	require.Equal(t, u.ID, me.UserID)
	_, err = byToken.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("tok", 1))
	require.NoError(t, err)
	_, err = byToken.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1})
	require.ErrorIs(t, err, iggy.ErrUnauthorized)
	_, err = byToken.CreateStream(ctx, "not-allowed")
	require.ErrorIs(t, err, iggy.ErrUnauthorized)

	// Deleting the user deletes its tokens.
	require.NoError(t, root.DeleteUser(ctx, iggy.NumericID(u.ID)))
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	require.ErrorIs(t, err, iggy.ErrInvalidPAT)
	rootTokens, err := root.ListPATs(ctx)
	require.NoError(t, err)
	require.Len(t, rootTokens, 1)
}
