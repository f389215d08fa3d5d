package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// login dials addr with opts and reports whether the login worked.
func login(t *testing.T, addr string, opts ...iggy.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, addr, append(opts, iggy.WithoutReconnect(), iggy.WithHeartbeat(0))...)
	if err != nil {
		return err
	}
	return cl.Close()
}

// userJSONOut is the shape of `user get --json` and `user create --json`.
type userJSONOut struct {
	ID          uint32            `json:"id"`
	Username    string            `json:"username"`
	Status      string            `json:"status"`
	CreatedAt   string            `json:"created_at"`
	Permissions *iggy.Permissions `json:"permissions"`
}

func TestUserCommands(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := ferry(t, stdin, append(args, addr)...)
		require.NoError(t, err, "ferry %v", args)
		return out
	}
	ctx := context.Background()
	root, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"), iggy.WithoutReconnect(), iggy.WithHeartbeat(0))
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	getUser := func(user string) userJSONOut {
		t.Helper()
		var u userJSONOut
		require.NoError(t, json.Unmarshal([]byte(run("", "user", "get", user, "--json")), &u))
		return u
	}

	// create with global, stream and topic permissions; get shows them.
	out := run("", "user", "create", "alice", "secret1", "-g", "r_srv,poll_messages",
		"-s", "1:m_str,read_topics#2:s_msg#4", "--stream-permissions", "3")
	require.Contains(t, out, `user "alice" created with id 1 (active)`)
	want := &iggy.Permissions{
		Global: iggy.GlobalPermissions{ReadServers: true, PollMessages: true},
		Streams: map[uint32]*iggy.StreamPermissions{
			1: {ManageStream: true, ReadTopics: true, Topics: map[uint32]*iggy.TopicPermissions{
				2: {SendMessages: true},
				4: {},
			}},
			3: {},
		},
	}
	got := getUser("alice")
	require.Equal(t, uint32(1), got.ID)
	require.Equal(t, "alice", got.Username)
	require.Equal(t, "active", got.Status)
	require.Equal(t, want, got.Permissions)
	details, err := root.GetUser(ctx, iggy.ParseID("alice"))
	require.NoError(t, err)
	require.Equal(t, details.Permissions, got.Permissions, "--json shows what the server holds")
	require.Equal(t, got, getUser("1"), "by id or by name")

	out = run("", "user", "get", "alice")
	require.Contains(t, out, `user 1 "alice": active, created `)
	require.Regexp(t, `global\s+read_servers, poll_messages`, out)
	require.Regexp(t, `stream 1\s+manage_stream, read_topics`, out)
	require.Regexp(t, `topic 1/2\s+send_messages`, out)
	require.Regexp(t, `topic 1/4\s+none`, out)
	require.Regexp(t, `stream 3\s+none`, out)
	require.Contains(t, out, "as flags: -g r_srv,p_msg -s 1:m_str,r_top#2:s_msg#4 -s 3")

	// The password from standard input, and no permissions.
	run("bobpass\n", "user", "create", "bob", "--user-status", "inactive")
	bob := getUser("bob")
	require.Equal(t, "inactive", bob.Status)
	require.Nil(t, bob.Permissions)
	require.Contains(t, run("", "user", "get", "bob"), "no permissions")

	// list
	out = run("", "user", "list")
	require.Regexp(t, `(?m)^ID\s+USERNAME\s+STATUS\s+CREATED$`, out)
	require.Regexp(t, `(?m)^0\s+iggy\s+active\s`, out)
	require.Regexp(t, `(?m)^1\s+alice\s+active\s`, out)
	require.Regexp(t, `(?m)^2\s+bob\s+inactive\s`, out)
	var list []userJSONOut
	require.NoError(t, json.Unmarshal([]byte(run("", "user", "list", "--json")), &list))
	require.Len(t, list, 3)
	require.Equal(t, "bob", list[2].Username)

	// update, name, status
	require.Contains(t, run("", "user", "update", "bob", "--name", "robert", "--status", "active"),
		`user bob renamed to "robert" and now active`)
	robert := getUser("2")
	require.Equal(t, "robert", robert.Username)
	require.Equal(t, "active", robert.Status)
	require.NoError(t, login(t, b.Addr(), iggy.WithCredentials("robert", "bobpass")))
	run("", "user", "name", "robert", "bob")
	run("", "user", "status", "bob", "inactive")
	run("", "user", "update", "2", "--status", "active")
	bob = getUser("bob")
	require.Equal(t, uint32(2), bob.ID)
	require.Equal(t, "active", bob.Status)

	// permissions replace: -s alone clears the global ones; nothing clears all.
	require.Contains(t, run("", "user", "permissions", "alice", "-s", "5:p_msg#1:r_top"),
		"user alice permissions set: -s 5:p_msg#1:r_top")
	require.Equal(t, &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
		5: {PollMessages: true, Topics: map[uint32]*iggy.TopicPermissions{1: {ReadTopic: true}}},
	}}, getUser("alice").Permissions)
	run("", "user", "permissions", "alice", "-g", "m_usr")
	require.Equal(t, &iggy.Permissions{Global: iggy.GlobalPermissions{ManageUsers: true}}, getUser("alice").Permissions)
	require.Contains(t, run("", "user", "permissions", "alice"), "user alice now has no permissions")
	require.Nil(t, getUser("alice").Permissions)

	// password: from standard input, then as arguments.
	run("secret1\nnewpass2\n", "user", "password", "alice")
	require.NoError(t, login(t, b.Addr(), iggy.WithCredentials("alice", "newpass2")))
	require.ErrorIs(t, login(t, b.Addr(), iggy.WithCredentials("alice", "secret1")), iggy.ErrInvalidCredentials)
	run("", "user", "password", "1", "newpass2", "third-pw")
	require.NoError(t, login(t, b.Addr(), iggy.WithCredentials("alice", "third-pw")))
	run("fourth-pw\n", "user", "password", "alice", "third-pw")
	require.NoError(t, login(t, b.Addr(), iggy.WithCredentials("alice", "fourth-pw")))

	// delete
	require.Contains(t, run("", "user", "delete", "bob"), "user bob deleted")
	_, err = ferry(t, "", "user", "get", "bob", addr)
	require.ErrorContains(t, err, `user "bob" not found`)
	require.NotContains(t, run("", "user", "list"), "bob")

	// --json for the commands that only say done.
	var ok map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("", "user", "status", "alice", "active", "--json")), &ok))
	require.Equal(t, true, ok["ok"])
}

func TestPATCommands(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	run := func(args ...string) string {
		t.Helper()
		out, err := ferry(t, "", append(args, addr)...)
		require.NoError(t, err, "ferry %v", args)
		return out
	}

	out := run("pat", "create", "deploy")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Equal(t, `personal access token "deploy" created (never expires); it is shown only this once:`, lines[0])
	token := lines[1]
	require.NoError(t, login(t, b.Addr(), iggy.WithToken(token)))
	out, err := ferry(t, "", "ping", "--token", token, addr)
	require.NoError(t, err)
	require.Contains(t, out, "pong")

	var created map[string]string
	require.NoError(t, json.Unmarshal([]byte(run("pat", "c", "client", "1day", "--json")), &created))
	require.Equal(t, "client", created["name"])
	require.Equal(t, "1d", created["expiry"])
	require.NoError(t, login(t, b.Addr(), iggy.WithToken(created["token"])))
	require.Contains(t, run("pat", "create", "sensor", "15days", "2min", "2s"), "expires in 360h 2m 2s")

	out = run("pat", "list")
	require.Regexp(t, `(?m)^NAME\s+EXPIRES$`, out)
	require.Regexp(t, `(?m)^deploy\s+never$`, out)
	require.Regexp(t, `(?m)^client\s+\d{4}-`, out)
	require.NotContains(t, out, token, "list never shows a token")
	var pats []map[string]string
	require.NoError(t, json.Unmarshal([]byte(run("pat", "list", "--json")), &pats))
	require.Len(t, pats, 3)
	exp, err := time.Parse(time.RFC3339Nano, pats[0]["expires_at"]) // client, by name
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), exp, time.Minute)

	require.Contains(t, run("pat", "delete", "deploy"), `personal access token "deploy" deleted`)
	require.NotContains(t, run("pat", "list"), "deploy")
	require.ErrorIs(t, login(t, b.Addr(), iggy.WithToken(token)), iggy.ErrInvalidPAT)

	// Tokens belong to the user logged in.
	run("user", "create", "carol", "carolpw", "-g", "r_srv")
	out = run("pat", "create", "mine", "-u", "carol", "-p", "carolpw")
	mine := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	require.NoError(t, login(t, b.Addr(), iggy.WithToken(mine)))
	out = run("pat", "list", "-u", "carol", "-p", "carolpw")
	require.Contains(t, out, "mine")
	require.NotContains(t, out, "client")
	require.NotContains(t, run("pat", "list"), "mine")
}

func TestUserErrors(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	_, err := ferry(t, "", "user", "create", "alice", "secret1", addr)
	require.NoError(t, err)
	for i, tc := range []struct {
		stdin string
		args  []string
		want  string
		code  int
	}{
		{"", []string{"user", "create", "x1x", "pw1", "-s", "1:m_strx"},
			`--stream-permissions "1:m_strx": stream 1: unknown permission "m_strx" (want one of manage_stream/m_str, read_stream/r_str,`, 2},
		{"", []string{"user", "create", "x1x", "pw1", "-s", "1#2:r_str"},
			`--stream-permissions "1#2:r_str": stream 1 topic 2: unknown permission "r_str" (want one of manage_topic/m_top,`, 2},
		{"", []string{"user", "create", "x1x", "pw1", "-g", "m_srv,bogus,m_top"},
			`--global-permissions "m_srv,bogus,m_top": unknown permission "bogus" (want one of manage_servers/m_srv,`, 2},
		{"", []string{"user", "create", "x1x", "pw1", "-s", "orders:p_msg"}, `stream id "orders" is not a number`, 2},
		{"", []string{"user", "create", "x1x", "pw1", "--user-status", "asleep"}, `--user-status "asleep": use active or inactive`, 2},
		{"", []string{"user", "permissions", "alice", "-s", "1", "-s", "1:p_msg"}, "stream 1 is given twice", 2},
		{"", []string{"user", "get", "nobody"}, `user "nobody" not found`, 1},
		{"", []string{"user", "get", "99"}, `user "99" not found`, 1},
		{"", []string{"user", "delete", "nobody"}, `user "nobody" not found`, 1},
		{"", []string{"user", "name", "nobody", "somebody"}, `user "nobody" not found`, 1},
		{"", []string{"user", "permissions", "nobody", "-g", "p_msg"}, `user "nobody" not found`, 1},
		{"", []string{"user", "password", "nobody", "pw1", "pw2"}, `user "nobody" not found`, 1},
		{"", []string{"user", "password", "alice", "wrong-pw", "pw2"}, "the current password of user alice is wrong", 1},
		{"", []string{"user", "password", "alice"}, "current password of alice: none on standard input", 2},
		{"secret1\n", []string{"user", "password", "alice"}, "new password of alice: none on standard input", 2},
		{"", []string{"user", "create", "x1x"}, "password of new user x1x: none on standard input", 2},
		{"", []string{"user", "create", "alice", "pw1"}, "already exists", 1},
		{"", []string{"user", "update", "alice"}, "nothing to change", 2},
		{"", []string{"user", "status", "alice", "sleeping"}, `STATUS "sleeping": use active or inactive`, 2},
		{"", []string{"user", "delete", "iggy"}, "root user", 1},
		{"", []string{"pat", "delete", "nothere"}, `personal access token "nothere" not found`, 1},
		{"", []string{"pat", "create", "tok", "soon"}, `EXPIRY "soon"`, 2},
	} {
		_, err := ferry(t, tc.stdin, append(tc.args, addr)...)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.want, "case %d", i)
		require.Equal(t, tc.code, exitCode(err), "case %d: %v", i, err)
	}
	_, err = ferry(t, "", "pat", "create", "dup", addr)
	require.NoError(t, err)
	_, err = ferry(t, "", "pat", "create", "dup", addr)
	require.ErrorContains(t, err, `personal access token "dup" already exists`)
}

func TestParsePermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		global  string
		streams []string
		want    *iggy.Permissions
		err     string
	}{
		{want: nil},
		{global: "m_srv,r_srv,m_usr,r_usr,m_str,r_str,m_top,r_top,p_msg,s_msg",
			want: wire.AllPermissions()},
		{global: "manage_topics, READ_TOPICS", want: &iggy.Permissions{Global: iggy.GlobalPermissions{ManageTopics: true, ReadTopics: true}}},
		{streams: []string{"71"}, want: &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{71: {}}}},
		{streams: []string{"2:m_str,r_str,m_top,r_top,p_msg,s_msg"}, want: &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
			2: {ManageStream: true, ReadStream: true, ManageTopics: true, ReadTopics: true, PollMessages: true, SendMessages: true}}}},
		{streams: []string{"3#1:s_msg#2:s_msg"}, want: &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
			3: {Topics: map[uint32]*iggy.TopicPermissions{1: {SendMessages: true}, 2: {SendMessages: true}}}}}},
		{streams: []string{"9#1#2"}, want: &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
			9: {Topics: map[uint32]*iggy.TopicPermissions{1: {}, 2: {}}}}}},
		{global: "p_msg", streams: []string{"4:manage_stream,r_top#1:s_msg,p_msg#2:manage_topic", "5:read_stream"},
			want: &iggy.Permissions{Global: iggy.GlobalPermissions{PollMessages: true}, Streams: map[uint32]*iggy.StreamPermissions{
				4: {ManageStream: true, ReadTopics: true, Topics: map[uint32]*iggy.TopicPermissions{
					1: {SendMessages: true, PollMessages: true}, 2: {ManageTopic: true}}},
				5: {ReadStream: true}}}},

		{global: "read_topic", err: `--global-permissions "read_topic": unknown permission "read_topic" (want one of manage_servers/m_srv`},
		{global: "r_topic,sent_msg", err: `unknown permissions "r_topic", "sent_msg"`},
		{global: "m_srv,", err: `unknown permission ""`},
		{global: " ", err: "no permissions given"},
		{streams: []string{"4a"}, err: `--stream-permissions "4a": stream id "4a" is not a number`},
		{streams: []string{""}, err: "missing stream id"},
		{streams: []string{":p_msg"}, err: "missing stream id"},
		{streams: []string{"-1:p_msg"}, err: `stream id "-1" is not a number`},
		{streams: []string{"4294967296"}, err: `stream id "4294967296" is not a number`},
		{streams: []string{"4:read_topic"}, err: `stream 4: unknown permission "read_topic" (want one of manage_stream/m_str`},
		{streams: []string{"55:read_topic,sent_messages"}, err: `stream 55: unknown permissions "read_topic", "sent_messages"`},
		{streams: []string{"1:"}, err: "stream 1: no permissions after the colon"},
		{streams: []string{"1:p_msg:s_msg"}, err: "stream 1: more than one colon"},
		{streams: []string{"1#m_str"}, err: `stream 1: topic id "m_str" is not a number`},
		{streams: []string{"1#"}, err: "stream 1: missing topic id"},
		{streams: []string{"1#2:p_msg:s_msg"}, err: "stream 1: topic 2: more than one colon"},
		{streams: []string{"1#2:reed_topic"}, err: `stream 1 topic 2: unknown permission "reed_topic" (want one of manage_topic/m_top, read_topic/r_top, poll_messages/p_msg, send_messages/s_msg)`},
		{streams: []string{"1#2:m_top#2"}, err: "stream 1: topic 2 is given twice"},
		{streams: []string{"1", "2", "1:p_msg"}, err: `--stream-permissions "1:p_msg": stream 1 is given twice`},
	} {
		got, err := permissionsFromFlags(tc.global, tc.streams)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "-g %q -s %q", tc.global, tc.streams)
			require.Equal(t, 2, exitCode(err), "a usage error")
			continue
		}
		require.NoError(t, err, "-g %q -s %q", tc.global, tc.streams)
		require.Equal(t, tc.want, got, "-g %q -s %q", tc.global, tc.streams)
		if got == nil {
			continue
		}
		// The flags user get prints parse back to the same permissions.
		var g string
		var s []string
		fields := strings.Fields(permissionFlagsString(got))
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i] == "-g" {
				g = fields[i+1]
			} else {
				s = append(s, fields[i+1])
			}
		}
		again, err := permissionsFromFlags(g, s)
		require.NoError(t, err, permissionFlagsString(got))
		require.Equal(t, got, again, permissionFlagsString(got))
	}
}

func TestPATExpiry(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"": 0, "none": 0, "Never": 0, "unlimited": 0,
		"1day": 24 * time.Hour, "3weeks": 21 * 24 * time.Hour, "15days 2min 2s": 15*24*time.Hour + 2*time.Minute + 2*time.Second,
		"1h30m": 90 * time.Minute,
	} {
		got, err := parsePATExpiry(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"soon", "5", "500ms", "1x"} {
		_, err := parsePATExpiry(in)
		require.Error(t, err, in)
		require.Equal(t, 2, exitCode(err), in)
	}
}

// A command the user may not run names the user and where rights come
// from, not only the server's bare code.
func TestDeniedCommandNamesTheUser(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	_, err := ferry(t, "", "user", "create", "reader", "secret1", "-g", "r_str", addr)
	require.NoError(t, err)
	out, err := ferry(t, "", "stream", "list", addr, "--username=reader", "--password=secret1")
	require.NoError(t, err, out)
	_, err = ferry(t, "", "stream", "create", "nope", addr, "--username=reader", "--password=secret1")
	require.ErrorContains(t, err, `user "reader" may not run create_stream on this server: `+
		"`ferry user get` shows the user's permissions")
	require.ErrorIs(t, err, iggy.ErrUnauthorized)
	require.Equal(t, 1, exitCode(err))
}
