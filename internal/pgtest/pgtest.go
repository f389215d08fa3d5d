package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the package reads.
const (
	// EnvDSN names a running server (superuser, logical replication on)
	// that tests use instead of starting their own.
	EnvDSN = "FERRY_TEST_POSTGRES_DSN"
	// EnvRequire set to 1 turns "no PostgreSQL here" from a skip into a
	// failure.
	EnvRequire = "FERRY_REQUIRE_POSTGRES"
)

var shared struct {
	once    sync.Once
	dsn     string
	err     error
	cluster *Cluster
}

// Main runs the tests and then stops the cluster the package may have
// started; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.cluster.Stop()
	os.Exit(code)
}

// ServerDSN returns the superuser DSN of the server tests use, starting a
// throwaway cluster on first use when EnvDSN is not set. Without a server
// it skips the test, or fails it when EnvRequire is 1.
func ServerDSN(tb testing.TB) string {
	tb.Helper()
	shared.once.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			shared.dsn = dsn
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.cluster, shared.err = StartCluster(ctx)
		if shared.err == nil {
			shared.dsn = shared.cluster.DSN
		}
	})
	if shared.err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("PostgreSQL is required (%s=1) but unavailable: %v", EnvRequire, shared.err)
		}
		tb.Skipf("no PostgreSQL for this test (set %s, or install PostgreSQL): %v", EnvDSN, shared.err)
	}
	return shared.dsn
}

// DB creates an empty database for the test and returns its DSN; the
// database and its replication slots are dropped when the test ends.
func DB(tb testing.TB) string {
	tb.Helper()
	server := ServerDSN(tb)
	name := dbName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatalf("pgtest: connect to %s: %v", EnvDSN, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() { drop(tb, server, name) })
	return WithDatabase(server, name)
}

// drop removes a test database and the replication slots that pin it.
func drop(tb testing.TB, server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Logf("pgtest: drop %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	for attempt := 0; attempt < 50; attempt++ {
		_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE database = $1 AND active_pid IS NOT NULL`, name)
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE database = $1 AND NOT active`, name)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		}
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Logf("pgtest: drop database %s: %v", name, err)
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func dbName(test string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := notIdent.ReplaceAllString(strings.ToLower(test), "_")
	if len(n) > 40 {
		n = n[:40]
	}
	return "t_" + n + "_" + hex.EncodeToString(b[:])
}

// WithDatabase returns dsn (a URL or key=value form) pointing at database
// name instead.
func WithDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return fmt.Sprintf("%s dbname='%s'", dsn, name)
}

// Private starts a throwaway cluster for this test alone, which it may
// Halt and Resume without disturbing tests that share the server of
// ServerDSN; it is stopped and removed when the test ends. It needs the
// server binaries (see FindBin) even when EnvDSN is set; without them it
// skips the test, or fails it when EnvRequire is 1.
func Private(tb testing.TB) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx)
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("PostgreSQL is required (%s=1) but a private cluster did not start: %v", EnvRequire, err)
		}
		tb.Skipf("no private PostgreSQL cluster for this test (install PostgreSQL): %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}
