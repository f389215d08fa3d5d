// Command testsum reads `go test -json` on standard input, prints what
// `go test` prints without -v (each package's ok / FAIL / no test files
// line, and the output of failed tests), and ends with one line:
//
//	N passed, N failed, N skipped
//
// It exits 1 when a test or a package failed (a build failure counts as a
// failed package), so scripts/test.sh can use it as the last stage of a
// pipe. It exists because go test has no summary line of its own and the
// line is what CI and people read first.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail events
	Test       string
	Output     string
}

func main() {
	var passed, failed, skipped, failedPkgs int
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	// Output of tests still running, printed only if they fail.
	pending := map[string][]string{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // build errors and other plain text
			continue
		}
		id := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failedPkgs++
		case "output":
			if e.Test != "" {
				pending[id] = append(pending[id], e.Output)
			} else if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") &&
				e.Output != "PASS\n" && e.Output != "FAIL\n" {
				fmt.Fprint(out, e.Output) // ok / FAIL / ? lines, and package-level output
			}
		case "pass", "skip":
			if e.Test != "" {
				if e.Action == "pass" {
					passed++
				} else {
					skipped++
				}
			}
			delete(pending, id)
		case "fail":
			if e.Test == "" {
				failedPkgs++
				break
			}
			failed++
			for _, o := range pending[id] {
				fmt.Fprint(out, o)
			}
			delete(pending, id)
		}
		out.Flush()
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testsum: read go test -json:", err)
		failedPkgs++
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || failedPkgs > 0 {
		out.Flush()
		os.Exit(1)
	}
}
