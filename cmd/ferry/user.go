package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/iggy"
	"github.com/spf13/cobra"
)

// The user commands mirror the Iggy CLI's (core/cli/src/args/user.rs):
// create, get, list, name, status, password, permissions and delete, with
// the same aliases, and update, which sets a name and a status at once.
// USER is an id or a username. Permissions take the Iggy CLI's syntax (see
// permissionsHelp).

const permissionsHelp = `Without -g and -s the user has no permissions.

-g/--global-permissions is a comma-separated list of global permissions,
each by its long or short name: manage_servers/m_srv, read_servers/r_srv,
manage_users/m_usr, read_users/r_usr, manage_streams/m_str,
read_streams/r_str, manage_topics/m_top, read_topics/r_top,
poll_messages/p_msg, send_messages/s_msg.

-s/--stream-permissions, once per stream, is
STREAM_ID[:PERMISSIONS][#TOPIC_ID[:PERMISSIONS]]...: the stream's id, after
a colon its permissions (manage_stream/m_str, read_stream/r_str,
manage_topics/m_top, read_topics/r_top, poll_messages/p_msg,
send_messages/s_msg), then after each # a topic's id and, after a colon,
its permissions (manage_topic/m_top, read_topic/r_top, poll_messages/p_msg,
send_messages/s_msg). An id without permissions gives none there. Ids are
numbers: ` + "`ferry stream list` and `ferry topic list STREAM`" + ` show them.`

func newUserCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{Use: "user", Short: "Create, list, inspect, change and delete users (USER is an id or a username)"}
	c.flags(cmd)
	// current is the subcommand running: the password reader needs its
	// stdin and stderr, which an action is not given.
	var current *cobra.Command
	sub := func(use, alias, short string, args cobra.PositionalArgs, fn action) *cobra.Command {
		run := c.run(fn)
		cmd := &cobra.Command{Use: use, Short: short, Args: args, RunE: func(cmd *cobra.Command, args []string) error {
			current = cmd
			return run(cmd, args)
		}}
		if alias != "" {
			cmd.Aliases = []string{alias}
		}
		return cmd
	}

	var (
		createStatus  string
		createGlobal  string
		createStreams []string
	)
	create := sub("create USERNAME [PASSWORD]", "c", "Create a user", cobra.RangeArgs(1, 2),
		func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			status, err := parseUserStatus("--user-status", createStatus)
			if err != nil {
				return err
			}
			perms, err := permissionsFromFlags(createGlobal, createStreams)
			if err != nil {
				return err
			}
			var password string
			if len(args) > 1 {
				password = args[1]
			} else if password, err = newSecrets(current).read("password of new user " + args[0]); err != nil {
				return err
			}
			u, err := cl.CreateUser(ctx, args[0], password, status, perms)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(out, userDetailsJSON(u))
			}
			_, err = fmt.Fprintf(out, "user %q created with id %d (%s)\n", u.Username, u.ID, u.Status)
			return err
		})
	create.Long = `Create a user with USERNAME (3..50 bytes) and PASSWORD (3..100 bytes).
Without PASSWORD it is read from standard input (a prompt on a terminal),
which keeps it out of the process list and the shell's history.

` + permissionsHelp
	create.Example = `  ferry user create guest guess --user-status inactive
  ferry user create sender s3nd3r -g p_msg -s 3#1:s_msg#2:s_msg
  ferry user create admin -g m_srv,r_srv,m_usr,r_usr,m_str,r_str,m_top,r_top,p_msg,s_msg < admin.pw`
	create.Flags().StringVar(&createStatus, "user-status", "active", "active or inactive")
	permissionFlags(create, &createGlobal, &createStreams)

	var (
		updateName   string
		updateStatus string
	)
	update := sub("update USER", "", "Rename a user and/or change its status", cobra.ExactArgs(1),
		func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			var status iggy.UserStatus
			if updateStatus != "" {
				var err error
				if status, err = parseUserStatus("--status", updateStatus); err != nil {
					return err
				}
			}
			if updateName == "" && status == 0 {
				return usageError{errors.New("nothing to change: give --name NAME and/or --status active|inactive")}
			}
			if err := cl.UpdateUser(ctx, iggy.ParseID(args[0]), updateName, status); err != nil {
				return explainUser(cl, args[0], err)
			}
			var changes []string
			if updateName != "" {
				changes = append(changes, fmt.Sprintf("renamed to %q", updateName))
			}
			if status != 0 {
				changes = append(changes, "now "+status.String())
			}
			return done(out, c.json, "user %s %s", args[0], strings.Join(changes, " and "))
		})
	update.Flags().StringVar(&updateName, "name", "", "new username (3..50 bytes)")
	update.Flags().StringVar(&updateStatus, "status", "", "new status: active or inactive")

	var (
		permGlobal  string
		permStreams []string
	)
	permissions := sub("permissions USER", "p", "Replace a user's permissions", cobra.ExactArgs(1),
		func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			perms, err := permissionsFromFlags(permGlobal, permStreams)
			if err != nil {
				return err
			}
			if err := cl.UpdatePermissions(ctx, iggy.ParseID(args[0]), perms); err != nil {
				return explainUser(cl, args[0], err)
			}
			if perms == nil {
				return done(out, c.json, "user %s now has no permissions", args[0])
			}
			return done(out, c.json, "user %s permissions set: %s", args[0], permissionFlagsString(perms))
		})
	permissions.Long = `Replace the permissions of USER with those -g and -s give: -g alone
removes its stream permissions, -s alone its global ones.

` + permissionsHelp
	permissions.Example = `  ferry user permissions guest -g p_msg,s_msg
  ferry user permissions user1 -s 4:manage_stream,r_top#1:s_msg,p_msg#2:manage_topic -s 5:r_str
  ferry user permissions guest          # removes them all`
	permissionFlags(permissions, &permGlobal, &permStreams)

	password := sub("password USER [CURRENT_PASSWORD] [NEW_PASSWORD]", "pwd", "Change a user's password", cobra.RangeArgs(1, 3),
		func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			in := newSecrets(current)
			current, newPass := "", ""
			var err error
			if len(args) > 1 {
				current = args[1]
			} else if current, err = in.read("current password of " + args[0]); err != nil {
				return err
			}
			if len(args) > 2 {
				newPass = args[2]
			} else if newPass, err = in.read("new password of " + args[0]); err != nil {
				return err
			}
			if err := cl.ChangePassword(ctx, iggy.ParseID(args[0]), current, newPass); err != nil {
				if errors.Is(err, iggy.ErrInvalidCredentials) {
					return fmt.Errorf("the current password of user %s is wrong: %w", args[0], err)
				}
				return explainUser(cl, args[0], err)
			}
			return done(out, c.json, "password of user %s changed", args[0])
		})
	password.Long = `Change the password of USER; the current one must match. A password left
out is read from standard input, a line each (a prompt on a terminal), which
keeps it out of the process list and the shell's history.`
	password.Example = `  ferry user password alice            # reads both passwords
  printf '%s\n%s\n' "$OLD" "$NEW" | ferry user password alice`

	cmd.AddCommand(create, update, permissions, password,
		sub("list", "l", "List users", cobra.NoArgs, func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			users, err := cl.ListUsers(ctx)
			if err != nil {
				return err
			}
			if c.json {
				js := make([]map[string]any, 0, len(users))
				for _, u := range users {
					js = append(js, userJSON(u))
				}
				return printJSON(out, js)
			}
			rows := make([][]string, 0, len(users))
			for _, u := range users {
				rows = append(rows, []string{strconv.FormatUint(uint64(u.ID), 10), u.Username, u.Status.String(), timeUS(u.CreatedAt)})
			}
			return table(out, "ID\tUSERNAME\tSTATUS\tCREATED", rows)
		}),
		sub("get USER", "g", "Show a user and its permissions", cobra.ExactArgs(1), func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			u, err := cl.GetUser(ctx, iggy.ParseID(args[0]))
			if err != nil {
				return explainUser(cl, args[0], err)
			}
			if c.json {
				return printJSON(out, userDetailsJSON(u))
			}
			return printUser(out, u)
		}),
		sub("name USER USERNAME", "n", "Rename a user", cobra.ExactArgs(2), func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.UpdateUser(ctx, iggy.ParseID(args[0]), args[1], 0); err != nil {
				return explainUser(cl, args[0], err)
			}
			return done(out, c.json, "user %s renamed to %q", args[0], args[1])
		}),
		sub("status USER STATUS", "s", "Set a user's status: active or inactive", cobra.ExactArgs(2), func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			status, err := parseUserStatus("STATUS", args[1])
			if err != nil {
				return err
			}
			if err := cl.UpdateUser(ctx, iggy.ParseID(args[0]), "", status); err != nil {
				return explainUser(cl, args[0], err)
			}
			return done(out, c.json, "user %s now %s", args[0], status)
		}),
		sub("delete USER", "d", "Delete a user (not root); its sessions end", cobra.ExactArgs(1), func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.DeleteUser(ctx, iggy.ParseID(args[0])); err != nil {
				return explainUser(cl, args[0], err)
			}
			return done(out, c.json, "user %s deleted", args[0])
		}),
	)
	return cmd
}

// permissionFlags adds -g and -s to cmd. -s is a string array, not a
// slice: its values hold commas.
func permissionFlags(cmd *cobra.Command, global *string, streams *[]string) {
	cmd.Flags().StringVarP(global, "global-permissions", "g", "", "global permissions, e.g. p_msg,s_msg (see above)")
	cmd.Flags().StringArrayVarP(streams, "stream-permissions", "s", nil,
		"STREAM_ID[:PERMISSIONS][#TOPIC_ID[:PERMISSIONS]]..., once per stream (see above)")
}

// explainUser names the user a "not found" answer is about, and how to see
// the users; other errors are returned as they are.
func explainUser(cl *iggy.Client, user string, err error) error {
	switch {
	case errors.Is(err, iggy.ErrUserNotFound):
		return fmt.Errorf("user %q not found on %s (`ferry user list` shows the users): %w", user, cl.Addr(), err)
	case errors.Is(err, iggy.ErrUserAlreadyExists):
		return fmt.Errorf("user %s: %w", user, err)
	case errors.Is(err, iggy.ErrCannotDeleteUser), errors.Is(err, iggy.ErrCannotChangePermissions):
		return fmt.Errorf("user %s is the root user, which cannot be deleted, deactivated or given other permissions: %w", user, err)
	}
	return err
}

func parseUserStatus(what, s string) (iggy.UserStatus, error) {
	switch strings.ToLower(s) {
	case "active":
		return iggy.UserActive, nil
	case "inactive":
		return iggy.UserInactive, nil
	}
	return 0, usageError{fmt.Errorf("%s %q: use active or inactive", what, s)}
}

// secrets reads passwords that were left off the command line: one line
// each from standard input, after a prompt on standard error when it is a
// terminal. (Without golang.org/x/term the terminal echoes what is typed.)
type secrets struct {
	r      *bufio.Reader
	prompt io.Writer // nil: not a terminal
}

func newSecrets(cmd *cobra.Command) *secrets {
	in := cmd.InOrStdin()
	s := &secrets{r: bufio.NewReader(in)}
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			s.prompt = cmd.ErrOrStderr()
		}
	}
	return s
}

// read reads the next line as what ("current password of alice").
func (s *secrets) read(what string) (string, error) {
	if s.prompt != nil {
		fmt.Fprintf(s.prompt, "%s%s: ", strings.ToUpper(what[:1]), what[1:])
	}
	line, err := s.r.ReadString('\n')
	switch {
	case errors.Is(err, io.EOF) && line == "":
		return "", usageError{fmt.Errorf("%s: none on standard input (give it as an argument, or a line of standard input)", what)}
	case err != nil && !errors.Is(err, io.EOF):
		return "", fmt.Errorf("read the %s from standard input: %w", what, err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func userJSON(u iggy.UserInfo) map[string]any {
	return map[string]any{"id": u.ID, "username": u.Username, "status": u.Status.String(), "created_at": timeUS(u.CreatedAt)}
}

// userDetailsJSON is userJSON with "permissions": the wire permissions'
// snake_case form (set flags only; streams and topics by id), or null.
func userDetailsJSON(u *iggy.UserDetails) map[string]any {
	js := userJSON(u.UserInfo)
	js["permissions"] = u.Permissions
	return js
}

// printUser shows a user, then a line per scope of its permissions and
// the flags that set them again.
func printUser(out io.Writer, u *iggy.UserDetails) error {
	fmt.Fprintf(out, "user %d %q: %s, created %s\n", u.ID, u.Username, u.Status, timeUS(u.CreatedAt))
	p := u.Permissions
	if p == nil {
		_, err := fmt.Fprintln(out, "no permissions")
		return err
	}
	fmt.Fprintln(out)
	rows := [][]string{{"global", orNone(setNames(globalPerms, &p.Global, false))}}
	for _, sid := range sortedKeys(p.Streams) {
		s := p.Streams[sid]
		rows = append(rows, []string{fmt.Sprintf("stream %d", sid), orNone(setNames(streamPerms, s, false))})
		for _, tid := range sortedKeys(s.Topics) {
			rows = append(rows, []string{fmt.Sprintf("topic %d/%d", sid, tid), orNone(setNames(topicPerms, s.Topics[tid], false))})
		}
	}
	if err := table(out, "SCOPE\tPERMISSIONS", rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nas flags: %s\n", permissionFlagsString(p))
	return err
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	return slices.Sorted(maps.Keys(m))
}

// perm is one permission flag of T with its Iggy CLI names.
type perm[T any] struct {
	long, short string
	flag        func(*T) *bool
}

var globalPerms = []perm[iggy.GlobalPermissions]{
	{"manage_servers", "m_srv", func(p *iggy.GlobalPermissions) *bool { return &p.ManageServers }},
	{"read_servers", "r_srv", func(p *iggy.GlobalPermissions) *bool { return &p.ReadServers }},
	{"manage_users", "m_usr", func(p *iggy.GlobalPermissions) *bool { return &p.ManageUsers }},
	{"read_users", "r_usr", func(p *iggy.GlobalPermissions) *bool { return &p.ReadUsers }},
	{"manage_streams", "m_str", func(p *iggy.GlobalPermissions) *bool { return &p.ManageStreams }},
	{"read_streams", "r_str", func(p *iggy.GlobalPermissions) *bool { return &p.ReadStreams }},
	{"manage_topics", "m_top", func(p *iggy.GlobalPermissions) *bool { return &p.ManageTopics }},
	{"read_topics", "r_top", func(p *iggy.GlobalPermissions) *bool { return &p.ReadTopics }},
	{"poll_messages", "p_msg", func(p *iggy.GlobalPermissions) *bool { return &p.PollMessages }},
	{"send_messages", "s_msg", func(p *iggy.GlobalPermissions) *bool { return &p.SendMessages }},
}

var streamPerms = []perm[iggy.StreamPermissions]{
	{"manage_stream", "m_str", func(p *iggy.StreamPermissions) *bool { return &p.ManageStream }},
	{"read_stream", "r_str", func(p *iggy.StreamPermissions) *bool { return &p.ReadStream }},
	{"manage_topics", "m_top", func(p *iggy.StreamPermissions) *bool { return &p.ManageTopics }},
	{"read_topics", "r_top", func(p *iggy.StreamPermissions) *bool { return &p.ReadTopics }},
	{"poll_messages", "p_msg", func(p *iggy.StreamPermissions) *bool { return &p.PollMessages }},
	{"send_messages", "s_msg", func(p *iggy.StreamPermissions) *bool { return &p.SendMessages }},
}

var topicPerms = []perm[iggy.TopicPermissions]{
	{"manage_topic", "m_top", func(p *iggy.TopicPermissions) *bool { return &p.ManageTopic }},
	{"read_topic", "r_top", func(p *iggy.TopicPermissions) *bool { return &p.ReadTopic }},
	{"poll_messages", "p_msg", func(p *iggy.TopicPermissions) *bool { return &p.PollMessages }},
	{"send_messages", "s_msg", func(p *iggy.TopicPermissions) *bool { return &p.SendMessages }},
}

// setPerms sets in into the permissions list names, comma-separated, by
// long or short name (any case); every unknown name is reported at once.
func setPerms[T any](perms []perm[T], list string, into *T) error {
	var unknown []string
	for _, given := range strings.Split(list, ",") {
		given = strings.TrimSpace(given)
		name := strings.ToLower(given)
		found := false
		for _, p := range perms {
			if name == p.long || name == p.short {
				*p.flag(into) = true
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, strconv.Quote(given))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	want := make([]string, len(perms))
	for i, p := range perms {
		want[i] = p.long + "/" + p.short
	}
	s := ""
	if len(unknown) > 1 {
		s = "s"
	}
	return fmt.Errorf("unknown permission%s %s (want one of %s)", s, strings.Join(unknown, ", "), strings.Join(want, ", "))
}

// setNames returns the names of the permissions set in p, long or short.
func setNames[T any](perms []perm[T], p *T, short bool) []string {
	var names []string
	for _, q := range perms {
		if *q.flag(p) {
			if short {
				names = append(names, q.short)
			} else {
				names = append(names, q.long)
			}
		}
	}
	return names
}

// parseGlobalPermissions parses -g's value.
func parseGlobalPermissions(s string) (iggy.GlobalPermissions, error) {
	var g iggy.GlobalPermissions
	if strings.TrimSpace(s) == "" {
		return g, errors.New("no permissions given (leave the flag out for none)")
	}
	return g, setPerms(globalPerms, s, &g)
}

// parseStreamPermissions parses one -s value:
// STREAM_ID[:PERMISSIONS][#TOPIC_ID[:PERMISSIONS]]...
func parseStreamPermissions(s string) (uint32, *iggy.StreamPermissions, error) {
	parts := strings.Split(s, "#")
	sid, list, hasList, err := splitScope("stream", parts[0])
	if err != nil {
		return 0, nil, err
	}
	sp := &iggy.StreamPermissions{}
	if hasList {
		if err := setPerms(streamPerms, list, sp); err != nil {
			return 0, nil, fmt.Errorf("stream %d: %w", sid, err)
		}
	}
	for _, part := range parts[1:] {
		tid, list, hasList, err := splitScope("topic", part)
		if err != nil {
			return 0, nil, fmt.Errorf("stream %d: %w", sid, err)
		}
		if sp.Topics[tid] != nil {
			return 0, nil, fmt.Errorf("stream %d: topic %d is given twice", sid, tid)
		}
		tp := &iggy.TopicPermissions{}
		if hasList {
			if err := setPerms(topicPerms, list, tp); err != nil {
				return 0, nil, fmt.Errorf("stream %d topic %d: %w", sid, tid, err)
			}
		}
		if sp.Topics == nil {
			sp.Topics = map[uint32]*iggy.TopicPermissions{}
		}
		sp.Topics[tid] = tp
	}
	return sid, sp, nil
}

const streamPermissionsFormat = "STREAM_ID[:PERMISSIONS][#TOPIC_ID[:PERMISSIONS]]...: " +
	"a stream's permissions follow a colon, each topic a #"

// splitScope splits ID[:PERMISSIONS] of a stream or topic.
func splitScope(what, s string) (id uint32, list string, hasList bool, err error) {
	idText, list, hasList := strings.Cut(s, ":")
	if hasList && strings.TrimSpace(list) == "" {
		return 0, "", false, fmt.Errorf("%s %s: no permissions after the colon (leave out the colon for none)", what, idText)
	}
	if strings.Contains(list, ":") {
		return 0, "", false, fmt.Errorf("%s %s: more than one colon in %q (the format is %s)", what, idText, s, streamPermissionsFormat)
	}
	if idText == "" {
		return 0, "", false, fmt.Errorf("missing %s id in %q (the format is %s)", what, s, streamPermissionsFormat)
	}
	n, perr := strconv.ParseUint(idText, 10, 32)
	if perr != nil {
		return 0, "", false, fmt.Errorf("%s id %q is not a number: permissions are by id, which `ferry stream list` and `ferry topic list STREAM` show (the format is %s)",
			what, idText, streamPermissionsFormat)
	}
	return uint32(n), list, hasList, nil
}

// permissionsFromFlags builds the permissions -g and -s give, as the Iggy
// CLI does: nil when neither is set, no global permissions with only -s,
// no stream permissions with only -g. Errors name the flag and its value.
func permissionsFromFlags(global string, streams []string) (*iggy.Permissions, error) {
	if global == "" && len(streams) == 0 {
		return nil, nil
	}
	p := &iggy.Permissions{}
	if global != "" {
		g, err := parseGlobalPermissions(global)
		if err != nil {
			return nil, usageError{fmt.Errorf("--global-permissions %q: %w", global, err)}
		}
		p.Global = g
	}
	for _, s := range streams {
		sid, sp, err := parseStreamPermissions(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("--stream-permissions %q: %w", s, err)}
		}
		if p.Streams[sid] != nil {
			return nil, usageError{fmt.Errorf("--stream-permissions %q: stream %d is given twice", s, sid)}
		}
		if p.Streams == nil {
			p.Streams = map[uint32]*iggy.StreamPermissions{}
		}
		p.Streams[sid] = sp
	}
	return p, nil
}

// permissionFlagsString renders p as the -g and -s flags that set it
// again, with short names; "" for none at all.
func permissionFlagsString(p *iggy.Permissions) string {
	if p == nil {
		return ""
	}
	var flags []string
	if g := setNames(globalPerms, &p.Global, true); len(g) > 0 {
		flags = append(flags, "-g "+strings.Join(g, ","))
	}
	for _, sid := range sortedKeys(p.Streams) {
		s := p.Streams[sid]
		spec := strconv.FormatUint(uint64(sid), 10)
		if names := setNames(streamPerms, s, true); len(names) > 0 {
			spec += ":" + strings.Join(names, ",")
		}
		for _, tid := range sortedKeys(s.Topics) {
			spec += "#" + strconv.FormatUint(uint64(tid), 10)
			if names := setNames(topicPerms, s.Topics[tid], true); len(names) > 0 {
				spec += ":" + strings.Join(names, ",")
			}
		}
		flags = append(flags, "-s "+spec)
	}
	if len(flags) == 0 {
		return "none (an empty permission set)"
	}
	return strings.Join(flags, " ")
}
