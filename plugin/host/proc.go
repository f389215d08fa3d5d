package host

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// proc is one running plugin process, whatever its transport: what the
// supervisor needs to run calls on it, tell how it failed, and end it.
// grpcProcess speaks go-plugin's gRPC, linesProcess the line protocol;
// both give the contract's calls as the generated gRPC client interfaces,
// so the Source and Sink adapters, their checks of the answers and the
// supervision (deadlines, kills, restarts with backoff, the reasons in
// the errors) are one code for both.
type proc interface {
	// pid is the process's id (0 when it never started).
	pid() int
	// rpc are the contract's calls on this process.
	rpc() rpcs
	// kill ends the process (and its process group) at once; why is kept
	// for the reason of calls that fail afterwards. Idempotent.
	kill(why string)
	// shutdown asks the process to exit and kills it when it does not
	// within a few seconds. Idempotent, and a no-op after kill.
	shutdown()
	// dead is closed once kill or shutdown ran; why then says why.
	dead() <-chan struct{}
	why() string
	// exited describes how the process ended ("exit status 3", "signal:
	// killed"), or "" while it runs.
	exited() string
	// lastWords quotes the last line of its standard error, for a
	// failure's reason ("" when it wrote none).
	lastWords() string
}

// rpcs are the calls of the contract on one process. A transport that
// lacks one (the line protocol has no Spec call) answers it with an
// error.
type rpcs struct {
	plugin    pluginpb.PluginClient
	source    pluginpb.SourceClient
	sink      pluginpb.SinkClient
	transform pluginpb.TransformClient // nil on the line protocol
}

// start starts a plugin process of m on its transport. log receives its
// output, with the connector's key.
func start(m *plugin.Manifest, log *slog.Logger) (proc, error) {
	switch m.Transport {
	case plugin.TransportGRPC, "":
		return startGRPC(m, log)
	case plugin.TransportLines:
		return startLines(m, log)
	}
	return nil, fmt.Errorf("plugin %s: transport %q: %w", m.Name, m.Transport, plugin.ErrTransportNotBuilt)
}

// lastWordsOf is a failure's quote of w's last line.
func lastWordsOf(w *LogWriter) string {
	if l := w.Last(); l != "" {
		return "; its last words on standard error: " + l
	}
	return ""
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(s), " ")
}
