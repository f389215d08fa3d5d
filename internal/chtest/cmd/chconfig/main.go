// Command chconfig writes the configuration of a throwaway ClickHouse
// server (chtest.Config) for scripts/test.sh: chconfig DIR HTTP_PORT TCP_PORT.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/ferryhq/ferry/internal/chtest"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: chconfig DIR HTTP_PORT TCP_PORT")
		os.Exit(2)
	}
	httpPort, err1 := strconv.Atoi(os.Args[2])
	tcpPort, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "chconfig: ports must be numbers")
		os.Exit(2)
	}
	if err := chtest.Config(os.Args[1], httpPort, tcpPort); err != nil {
		fmt.Fprintln(os.Stderr, "chconfig:", err)
		os.Exit(1)
	}
}
