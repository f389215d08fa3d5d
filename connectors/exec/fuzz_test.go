package exec

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var fuzzSeeds = []string{
	`echo {payload}`,
	`cd /srv/app; php artisan execute:command {payload}`,
	`echo "a {payload} b" 'c {offset} d' \{id}`,
	`echo "$(printf %s '{payload}')" $(( {offset} + 1 ))`,
	"cat <<EOF\n{payload}\nEOF\necho {topic}",
	"cat <<-'X'\n\t{payload}\n\tX\n",
	"echo `x` ${y:-{payload}} $'z'",
	"# {payload}\necho {stream} a#{partition} {#}",
	`echo '{"k":"{payload}"}'`,
	`echo "\"{payload}\\" '{payload}'"`,
	`echo $(case a in a) echo {payload};; esac)`,
}

// FuzzRewrite checks the rewriter's structural promises on any command
// line: it never panics; apart from the placeholders it copies the text
// byte for byte; every reference it inserts is read by the shell inside
// double quotes (or a here-document body, or $((…)) for numbers), never
// as bare code; and a line that /bin/sh -n accepts stays acceptable.
func FuzzRewrite(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		if strings.Contains(command, "FERRY_") || strings.IndexByte(command, 0) >= 0 {
			t.Skip("the line names Ferry's variables itself, or cannot be an argument")
		}
		out, uses, err := Rewrite(command)
		if err != nil {
			return
		}

		// Byte for byte, apart from the placeholders.
		marked, _, err := rewrite(command, func(p Placeholder, _ quoting) string { return "\x00" + p.Name + "\x00" })
		require.NoError(t, err)
		n := strings.Count(marked, "\x00") / 2
		restored := marked
		for _, p := range Placeholders {
			restored = strings.ReplaceAll(restored, "\x00"+p.Name+"\x00", "{"+p.Name+"}")
		}
		require.Equal(t, command, restored)
		require.Equal(t, n > 0, len(uses) > 0)

		// Every inserted reference is quoted, as the scanner reads the result.
		var refs int
		s := &scanner{src: out, ref: reference, uses: map[string]bool{}, onVar: func(name string, q quoting) {
			if !strings.HasPrefix(name, "FERRY_") {
				return
			}
			refs++
			require.NotEqual(t, inCode, q, "a reference to %s is bare code in %q (from %q)", name, out, command)
		}}
		require.NoError(t, s.code(false), "the rewritten line %q (from %q) must scan", out, command)
		require.Equal(t, n, refs, "placeholders rewritten vs references found in %q", out)
		require.Empty(t, s.uses, "no placeholder may survive in %q", out)

		// Syntax: what sh accepts before, it accepts after.
		if len(command) > 2000 || n == 0 {
			return
		}
		if shSyntaxOK(t, command) {
			require.True(t, shSyntaxOK(t, out), "sh -n accepts %q but not its rewrite %q", command, out)
		}
	})
}

// shSyntaxOK runs /bin/sh -n: it parses the text and runs nothing.
func shSyntaxOK(t *testing.T, text string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "/bin/sh", "-n", "-c", text)
	cmd.Env = []string{"PATH=/nonexistent"}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sh -n did not finish for %q", text)
	}
	return err == nil
}

// fuzzTokens are what FuzzRewriteRun builds command lines from: shell
// syntax and words that name no program. Nothing here can write a file
// (no '>'), define a function or loop, and the runs have no PATH.
var fuzzTokens = []string{
	"{payload}", "{offset}", "{id}", "'", `"`, `\`, " ", "a", "b1", "$(", ")", "${", "}", ";",
	"|", "\n", "#", "$((", "))", "<<", "EOF", "`", "$'", "{", "-", "$", "=", ":", "echo", "printf %s",
}

// FuzzRewriteRun runs rewritten command lines with payloads that would
// create files if any byte of them were read as shell code, and checks
// that none appears (and that sh -n accepts the rewrite of a line it
// accepts). The lines are made of fuzzTokens so that running
// them is harmless whatever they say.
func FuzzRewriteRun(f *testing.F) {
	f.Add([]byte{0, 4, 0, 4, 3, 0, 3})
	f.Add([]byte{28, 6, 0, 8, 28, 4, 0, 4, 6, 28, 0, 8})
	f.Add([]byte{19, 21, 15, 0, 15, 21, 15, 28, 1, 2})
	f.Add([]byte{28, 0, 6, 17, 1, 18, 8})
	payload := strings.Join(hostile, "\n") + "\n'\"$(>pwned11)\"'`>pwned12`;>pwned13"
	f.Fuzz(func(t *testing.T, picks []byte) {
		if len(picks) > 64 {
			t.Skip("long lines add nothing")
		}
		var b strings.Builder
		for _, p := range picks {
			b.WriteString(fuzzTokens[int(p)%len(fuzzTokens)])
		}
		command := b.String()
		out, uses, err := Rewrite(command)
		if err != nil || len(uses) == 0 {
			return
		}
		if shSyntaxOK(t, command) {
			require.True(t, shSyntaxOK(t, out), "sh -n accepts %q but not its rewrite %q", command, out)
		}
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := osexec.CommandContext(ctx, "/bin/sh", "-c", out)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/nonexistent", "FERRY_PAYLOAD=" + payload, "FERRY_OFFSET=7",
			"FERRY_ID=00000000-0000-0000-0000-000000000000"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		_ = cmd.Run() // the line may well be an error; only its effects matter
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		matches, err := filepath.Glob(filepath.Join(dir, "pwned*"))
		require.NoError(t, err)
		require.Empty(t, matches, "the payload ran as code: %q (rewritten %q)", command, out)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "nothing may be written: %q", command)
	})
}
