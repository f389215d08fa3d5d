package host_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/host"
)

// binDir holds the plugins the tests build, once per test binary.
var (
	binDir   string
	buildMu  sync.Mutex
	builtBin = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-plugin-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles a plugin package (relative to the module root) once.
func build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := builtBin[pkg]; ok {
		return b
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	builtBin[pkg] = out
	return out
}

// manifest writes a ferry-plugin.toml for bin into a new directory and
// returns its path.
func manifest(t testing.TB, name, kind, bin string, args []string, extra string) string {
	t.Helper()
	dir := t.TempDir()
	var quoted []string
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	text := fmt.Sprintf("name = %q\nkind = %q\ncommand = %q\nargs = [%s]\n%s\n", name, kind, bin, strings.Join(quoted, ", "), extra)
	p := filepath.Join(dir, "ferry-plugin.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// registry resolves plugins and nothing else.
func registry() *connector.Registry {
	r := connector.NewRegistry()
	host.Install(r)
	return r
}

// processesOf lists the pids of running processes of the executable bin.
func processesOf(bin string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != bin {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue // a zombie, dead already
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// lines are the complete lines of a file (none when it does not exist).
func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(s[:i], "\n")
}

func kindOf(k string) connector.Kind { return connector.Kind(k) }
