package servertest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test binary doubles as the server: with FERRY_SERVERTEST_LISTEN set
// it listens there until killed; with FERRY_SERVERTEST_FAIL it prints the
// reason and exits at once.
func TestMain(m *testing.M) {
	if msg := os.Getenv("FERRY_SERVERTEST_FAIL"); msg != "" {
		fmt.Println(msg)
		os.Exit(3)
	}
	if addr := os.Getenv("FERRY_SERVERTEST_LISTEN"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	}
	os.Exit(m.Run())
}

func serve(t *testing.T) (Command, string) {
	t.Helper()
	dir, err := TempDir("servertest")
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return Command{
		Args:  []string{os.Args[0]},
		Env:   append(os.Environ(), "FERRY_SERVERTEST_LISTEN="+addr),
		Dir:   dir,
		Ready: Dial(addr),
	}, addr
}

func TestKillRestartStop(t *testing.T) {
	c, addr := serve(t)
	p, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := Dial(addr)(); err != nil {
		t.Fatalf("ready but not serving: %v", err)
	}
	p.Kill()
	if err := Dial(addr)(); err == nil {
		t.Fatal("still serving after Kill")
	}
	if _, err := os.Stat(c.Dir); err != nil {
		t.Fatalf("Kill removed the server's directory: %v", err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := Dial(addr)(); err != nil {
		t.Fatalf("not serving after Restart: %v", err)
	}
	p.Stop()
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stop left the directory: %v", err)
	}
}

func TestAServerThatExitsAtStartSaysWhy(t *testing.T) {
	c, _ := serve(t)
	defer os.RemoveAll(c.Dir)
	c.Env = append(c.Env, "FERRY_SERVERTEST_FAIL=bad config at line 7")
	_, err := Start(c)
	if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), "bad config at line 7") {
		t.Fatalf("want the exit and the server's reason, got %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Dir, "server.out")); !strings.Contains(string(b), "bad config") {
		t.Fatalf("server.out = %q", b)
	}
}

func TestUnavailableSkipsUnlessRequired(t *testing.T) {
	s := &Server{Name: "Nothing", URLEnv: "FERRY_SERVERTEST_URL_UNSET", RequireEnv: "FERRY_SERVERTEST_REQUIRE",
		Start: func() (*Process, string, error) { return nil, "", errors.New("not installed") }}
	var sub *testing.T
	t.Run("optional", func(t *testing.T) { sub = t; s.URL(t) })
	if !sub.Skipped() {
		t.Fatal("an unavailable optional server did not skip the test")
	}
	t.Setenv("FERRY_SERVERTEST_URL_UNSET", "tcp://given")
	if got := s.URL(t); got != "tcp://given" {
		t.Fatalf("URL = %q, want the one in the environment", got)
	}
}

// A start that lost its port to another process is tried again on a new
// one; any other failure is returned at once.
func TestStartRetriesATakenPort(t *testing.T) {
	tries := 0
	s := &Server{Name: "flaky", Start: func() (*Process, string, error) {
		tries++
		if tries < 3 {
			return nil, "", errors.New("flaky exited at start: listen tcp 127.0.0.1:4242: bind: address already in use")
		}
		return &Process{}, "flaky://ok", nil
	}}
	if _, u, err := s.start(); err != nil || u != "flaky://ok" || tries != 3 {
		t.Fatalf("start = %q, %v after %d tries; want flaky://ok after 3", u, err, tries)
	}
	tries = 0
	s.Start = func() (*Process, string, error) { tries++; return nil, "", errors.New("no such file") }
	if _, _, err := s.start(); err == nil || tries != 1 {
		t.Fatalf("start = %v after %d tries; want the error after 1", err, tries)
	}
}
