// Command ferry is Ferry's one binary: the connector runtime, the embedded
// Iggy-compatible broker, and admin commands for any Iggy server.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("ferry", version)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: ferry version")
	os.Exit(2)
}
