package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Cluster is a throwaway PostgreSQL cluster run from a temporary directory.
type Cluster struct {
	// Dir holds the data directory, the socket and the server log.
	Dir string
	// Port is the loopback TCP port it listens on.
	Port int
	// DSN connects as the superuser "postgres" to database "postgres".
	DSN string

	bin     string
	runAs   string // "postgres" when the caller is root (initdb refuses root)
	stopped bool
}

// FindBin returns the directory holding initdb and pg_ctl: $FERRY_PG_BIN,
// else the directory of initdb on PATH, else the newest
// /usr/lib/postgresql/<version>/bin (Debian's layout).
func FindBin() (string, error) {
	if d := os.Getenv("FERRY_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("FERRY_PG_BIN=%s has no initdb: %w", d, err)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link in /usr/local/bin: pg_ctl sits beside the real one
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found: install PostgreSQL (Debian: apt-get install postgresql) or set FERRY_PG_BIN")
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
	return found[len(found)-1], nil
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartCluster initialises a cluster in a new temporary directory with
// logical replication on, starts it on a free loopback port and waits
// until it accepts connections. Stop removes it.
func StartCluster(ctx context.Context) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ferry-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		c.runAs = "postgres"
	}
	if err := c.init(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if lastErr = c.start(ctx); lastErr == nil {
			return c, nil
		}
	}
	c.Stop()
	return nil, lastErr
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) init(ctx context.Context) error {
	if c.runAs != "" {
		u, err := user.Lookup(c.runAs)
		if err != nil {
			return fmt.Errorf("pgtest: running as root needs the %q user to run initdb: %w", c.runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(c.Dir, 0o755); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		if err := os.Chown(c.Dir, uid, gid); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	hba := strings.Join([]string{
		"local all all trust",
		"local replication all trust",
		"host all postgres 127.0.0.1/32 trust",
		"host replication postgres 127.0.0.1/32 trust",
		"host all all 127.0.0.1/32 scram-sha-256",
		"host replication all 127.0.0.1/32 scram-sha-256",
		"",
	}, "\n")
	if err := c.writeConf("pg_hba.conf", hba, false); err != nil {
		return err
	}
	return nil
}

// writeConf writes (or appends to) a file in the data directory, keeping
// its owner.
func (c *Cluster) writeConf(name, content string, appendTo bool) error {
	p := filepath.Join(c.data(), name)
	flags := os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(p, flags, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("pgtest: write %s: %w", name, err)
	}
	return f.Close()
}

func (c *Cluster) start(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_connections = 300
fsync = off
full_page_writes = off
`, port, c.Dir)
	if err := c.writeConf("postgresql.conf", conf, true); err != nil {
		return err
	}
	logFile := filepath.Join(c.Dir, "server.log")
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", logFile, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pgtest: pg_ctl start on port %d: %w: %s\n%s", port, err, out, tail(log, 2000))
	}
	c.Port = port
	c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return nil
}

// Stop stops the server at once and removes its directory. It is
// idempotent.
func (c *Cluster) Stop() {
	if c == nil || c.stopped {
		return
	}
	c.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.Port != 0 {
		_, _ = c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	}
	os.RemoveAll(c.Dir)
}

func (c *Cluster) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.Dir
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Halt stops the server the way an operator does (pg_ctl stop -m fast:
// sessions are ended with admin_shutdown, new connections are refused)
// and keeps its data; Resume starts it again on the same port. Only a
// test's own cluster may be halted: see Private.
func (c *Cluster) Halt(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// Resume starts a halted server again on its port.
func (c *Cluster) Resume(ctx context.Context) error {
	logFile := filepath.Join(c.Dir, "server.log")
	if out, err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", logFile, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pgtest: pg_ctl start on port %d: %w: %s\n%s", c.Port, err, out, tail(log, 2000))
	}
	return nil
}
