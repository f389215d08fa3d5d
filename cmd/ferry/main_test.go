package main

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// envRunCLI makes the test binary act as the ferry binary: its value is
// the JSON array of arguments. Tests use it to run the CLI as another
// process (another user) without building the binary.
const envRunCLI = "FERRY_TEST_RUN_CLI"

// TestMain gives the test binary a configuration home of its own, so the
// local API tokens the tests' runtimes write (and the in-process ferry
// commands read, as a user's would) stay out of the real one; or, with
// envRunCLI set, runs the ferry command line.
func TestMain(m *testing.M) {
	if argv := os.Getenv(envRunCLI); argv != "" {
		var args []string
		if err := json.Unmarshal([]byte(argv), &args); err != nil {
			fmt.Fprintln(os.Stderr, envRunCLI+":", err)
			os.Exit(2)
		}
		os.Args = append([]string{"ferry"}, args...)
		main()
		os.Exit(0)
	}
	home, err := os.MkdirTemp("", "ferry-cli-test-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
