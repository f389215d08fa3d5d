// Command testservers starts the servers of a test run at once, in
// parallel, and keeps them up until it is told to stop (SIGTERM or SIGINT):
//
//	testservers -env FILE rabbitmq clickhouse ...
//
// When every server is ready it writes FILE, "export NAME=value" lines that
// point the tests at them (written whole, by rename, so a reader never sees
// half of it). A server that fails to start fails the command, with the
// server's own explanation, and stops the others.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/ferryhq/ferry/internal/servertest"
)

// kinds are the servers this command can start, by name; each kind's file
// here adds itself.
var kinds = map[string]*servertest.Server{}

func main() {
	envFile := flag.String("env", "", "write the servers' environment here")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: testservers -env FILE NAME...\nnames: %s\n", strings.Join(names(), " "))
	}
	flag.Parse()
	if *envFile == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*envFile, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "testservers:", err)
		os.Exit(1)
	}
}

// run starts the servers, writes their environment and waits for a
// signal; the servers are stopped however it returns.
func run(envFile string, want []string) error {
	stop := make(chan os.Signal, 1) // a stop while starting is kept for later
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	procs, env, err := startAll(want)
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	if err != nil {
		return err
	}
	if err := writeEnv(envFile, env); err != nil {
		return err
	}
	<-stop
	return nil
}

func names() []string {
	var n []string
	for k := range kinds {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func startAll(want []string) ([]*servertest.Process, []string, error) {
	type result struct {
		proc *servertest.Process
		env  []string
		err  error
	}
	results := make([]result, len(want))
	var wg sync.WaitGroup
	for i, name := range want {
		s, ok := kinds[name]
		if !ok {
			return nil, nil, fmt.Errorf("no server kind %q (have %s)", name, strings.Join(names(), " "))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, env, err := s.StartShared()
			results[i] = result{p, env, err}
		}()
	}
	wg.Wait()
	var procs []*servertest.Process
	var env []string
	var errs []string
	for _, r := range results {
		if r.proc != nil {
			procs = append(procs, r.proc)
		}
		env = append(env, r.env...)
		if r.err != nil {
			errs = append(errs, r.err.Error())
		}
	}
	if errs != nil {
		return procs, nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return procs, env, nil
}

func writeEnv(path string, env []string) error {
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
