package exec

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRewrite(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ in, want string }{
		{`echo {payload}`, `echo "$FERRY_PAYLOAD"`},
		{`cd /srv/app; php artisan execute:command {payload}`, `cd /srv/app; php artisan execute:command "$FERRY_PAYLOAD"`},
		{`echo "got: {payload}!"`, `echo "got: ${FERRY_PAYLOAD}!"`},
		{`echo '{payload}'`, `echo ''"${FERRY_PAYLOAD}"''`},
		{`echo 'at {offset} in {topic}'`, `echo 'at '"${FERRY_OFFSET}"' in '"${FERRY_TOPIC}"''`},
		{`f-{partition}-{offset}.txt`, `f-"$FERRY_PARTITION"-"$FERRY_OFFSET".txt`},
		{`x={id} y={timestamp} run {stream}`, `x="$FERRY_ID" y="$FERRY_TIMESTAMP" run "$FERRY_STREAM"`},
		{`echo \{payload} "\{payload}"`, `echo \{payload} "\{payload}"`},
		{`echo ${payload} $payload`, `echo ${payload} $payload`},
		{`echo '{"a":1}' {unknown} {a,b} { x; }`, `echo '{"a":1}' {unknown} {a,b} { x; }`},
		{"# run {payload}\necho {topic} # {payload}", "# run {payload}\necho \"$FERRY_TOPIC\" # {payload}"},
		{`echo a#{payload} {#} {payload}`, `echo a#"$FERRY_PAYLOAD" {#} "$FERRY_PAYLOAD"`},
		{`echo "$(printf %s {payload} | wc -c)"`, `echo "$(printf %s "$FERRY_PAYLOAD" | wc -c)"`},
		{`echo $(echo "'{payload}'" $(echo '{offset}'))`, `echo $(echo "'${FERRY_PAYLOAD}'" $(echo ''"${FERRY_OFFSET}"''))`},
		{`echo $(( {offset} + 1 )) $((2*{partition}))`, `echo $(( ${FERRY_OFFSET} + 1 )) $((2*${FERRY_PARTITION}))`},
		{"cat <<EOF\n{payload} \"{topic}\"\nEOF\necho {offset}", "cat <<EOF\n${FERRY_PAYLOAD} \"${FERRY_TOPIC}\"\nEOF\necho \"$FERRY_OFFSET\""},
		{"cat <<-END >f\n\t$(echo {payload})\n\tEND\n", "cat <<-END >f\n\t$(echo \"$FERRY_PAYLOAD\")\n\tEND\n"},
		{"cat <<'EOF'\nliteral $x\nEOF\necho {id}", "cat <<'EOF'\nliteral $x\nEOF\necho \"$FERRY_ID\""},
		{`cat <<< {payload}`, `cat <<< "$FERRY_PAYLOAD"`},
		{`echo ${x:-"}"} {payload}`, `echo ${x:-"}"} "$FERRY_PAYLOAD"`},
		{"echo `date` {payload}", "echo `date` \"$FERRY_PAYLOAD\""},
		{`echo $'a\'b' {payload}`, `echo $'a\'b' "$FERRY_PAYLOAD"`},
		{"echo a \\\n{payload}", "echo a \\\n\"$FERRY_PAYLOAD\""},
	} {
		got, _, err := Rewrite(tc.in)
		require.NoError(t, err, "case %d: %q", i, tc.in)
		require.Equal(t, tc.want, got, "case %d: %q", i, tc.in)
	}
}

func TestRewriteUses(t *testing.T) {
	t.Parallel()
	_, uses, err := Rewrite(`echo {offset} '{topic}' \{payload}`)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"offset": true, "topic": true}, uses)
}

func TestRewriteRefuses(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ in, want string }{
		{"echo `echo {payload}`", "placeholder {payload} is inside backquotes"},
		{"echo \"`cat {offset}`\"", "placeholder {offset} is inside backquotes"},
		{`echo ${x:-{payload}}`, "inside a parameter expansion"},
		{`echo $(( {payload} + 1 ))`, "inside an arithmetic expansion"},
		{`echo $(( {id} ))`, "placeholder {id}"},
		{`echo $'{payload}'`, "inside $'...' quoting"},
		{"cat <<'EOF'\n{payload}\nEOF", "quoted delimiter"},
		{"cat <<\\EOF\n{payload}\nEOF", "quoted delimiter"},
		{`echo 'open {payload}`, "unterminated single quote (at byte 5)"},
		{`echo "open {payload}`, "unterminated double quote"},
		{`echo $(open {payload}`, "unterminated $("},
		{`echo ${open`, "unterminated ${"},
		{`echo $(( 1 + 2 )`, "unterminated $(("},
		{"echo `open", "unterminated backquote"},
		{"echo a\x00b", "NUL byte"},
		{"cat <<", "without a delimiter"},
	} {
		_, _, err := Rewrite(tc.in)
		require.Error(t, err, "case %d: %q", i, tc.in)
		require.Contains(t, err.Error(), tc.want, "case %d: %q", i, tc.in)
	}
}

// hostile holds payloads that would run commands if they were spliced
// into shell text; each would create a file named pwned* in the current
// directory.
var hostile = []string{
	`; >pwned1`,
	`$(>pwned2)`,
	"`>pwned3`",
	`'; >pwned4; '`,
	`"; >pwned5; "`,
	"line one\n>pwned6\nline three",
	`\"; >pwned7 #`,
	`' "$(>pwned8)" '`,
	"EOF\n>pwned9\nEOF",
	`${x:=$(>pwned10)}`,
	`*`,
	`-n`,
	`  spaced   out  `,
	``,
}

// TestRewriteRunsAsData runs rewritten commands in every quoting with
// hostile payloads, checks the payload arrives as exactly one argument
// with every byte, and that nothing ran.
func TestRewriteRunsAsData(t *testing.T) {
	t.Parallel()
	commands := []string{
		`printf '%s' {payload} > out`,
		`printf '%s' "{payload}" > out`,
		`printf '%s' '{payload}' > out`,
		`printf '%s' "$(printf '%s' {payload})" > out`,
		`x={payload}; printf '%s' "$x" > out`,
		"cat > out <<EOF\n{payload}\nEOF",
		`printf '%s' "[{payload}]" > out`,
		`printf '%s' '[{payload}]' > out`,
		`printf '%s' [{payload}] > out`,
	}
	for ci, command := range commands {
		script, _, err := Rewrite(command)
		require.NoError(t, err, "command %d", ci)
		for pi, payload := range hostile {
			dir := t.TempDir()
			want := payload
			switch {
			case strings.HasPrefix(command, "cat"):
				want += "\n" // a here-document ends with a newline
			case strings.Contains(command, "[{payload}]"):
				want = "[" + payload + "]"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := osexec.CommandContext(ctx, "/bin/sh", "-c", script)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FERRY_PAYLOAD=" + payload}
			out, err := cmd.CombinedOutput()
			cancel()
			require.NoError(t, err, "command %d payload %d: %s", ci, pi, out)
			got, err := os.ReadFile(filepath.Join(dir, "out"))
			require.NoError(t, err)
			require.Equal(t, want, string(got), "command %d %q payload %d", ci, command, pi)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "command %d payload %d: only out may exist", ci, pi)
		}
	}
}
