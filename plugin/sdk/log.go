package sdk

import (
	"log/slog"
	"os"
)

// stderr is the process's standard error as it was before go-plugin's
// Serve replaced os.Stderr with a pipe it forwards over gRPC: writes to it
// reach Ferry at once, even from a process about to exit.
var stderr = os.NewFile(2, "stderr")

// logger writes to standard error, which Ferry logs under the
// connector's key (so the key is not repeated here).
func logger(string) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
