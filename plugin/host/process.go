package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// grpcProcess is one running plugin process on the gRPC transport.
type grpcProcess struct {
	m      *plugin.Manifest
	client *goplugin.Client
	cmd    *exec.Cmd
	pid_   int
	stderr *LogWriter
	stdout *LogWriter

	conn      *grpc.ClientConn
	plugin    pluginpb.PluginClient
	source    pluginpb.SourceClient
	sink      pluginpb.SinkClient
	transform pluginpb.TransformClient

	killOnce sync.Once
	killed   chan struct{} // closed once kill ran
	why_     string        // why it was killed, set before killed closes
}

var _ proc = (*grpcProcess)(nil)

func (p *grpcProcess) pid() int              { return p.pid_ }
func (p *grpcProcess) dead() <-chan struct{} { return p.killed }
func (p *grpcProcess) why() string           { return p.why_ }
func (p *grpcProcess) rpc() rpcs {
	return rpcs{plugin: p.plugin, source: p.source, sink: p.sink, transform: p.transform}
}

// hostPlugin gives go-plugin's client the connection.
type hostPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

func (hostPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host does not serve plugins")
}

func (hostPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// startGRPC starts a plugin process of m and waits for its handshake.
// log receives its output, with the connector's key.
func startGRPC(m *plugin.Manifest, log *slog.Logger) (*grpcProcess, error) {
	cmd, limited := Command(m)
	p := &grpcProcess{m: m, cmd: cmd, stderr: NewLogWriter(log, "stderr"), stdout: NewLogWriter(log, "stdout"), killed: make(chan struct{})}
	p.client = goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		Plugins:          goplugin.PluginSet{plugin.PluginName: hostPlugin{}},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		SkipHostEnv:      true,
		StartTimeout:     m.Limits.StartTimeout,
		Stderr:           p.stderr,
		SyncStderr:       p.stderr,
		SyncStdout:       p.stdout,
		Logger:           hclog.NewNullLogger(),
	})
	rpc, err := p.client.Client()
	if cmd.Process != nil {
		p.pid_ = cmd.Process.Pid
	}
	if err == nil && !limited {
		if lerr := ApplyLimits(p.pid_, m.Limits.MemoryLimit); lerr != nil {
			err = fmt.Errorf("set its memory limit: %w", lerr)
		}
	}
	var raw any
	if err == nil {
		raw, err = rpc.Dispense(plugin.PluginName)
	}
	if err != nil {
		reason := oneLine(err.Error())
		if i := strings.Index(reason, " This usually means"); i > 0 {
			reason = reason[:i] // go-plugin's guesses, which name its own causes
		}
		time.Sleep(20 * time.Millisecond) // let an exit be seen
		if exit := p.exited(); exit != "" {
			reason = fmt.Sprintf("it exited before its handshake (%s): %s", exit, reason)
		}
		p.kill("it failed to start")
		return nil, fmt.Errorf("plugin %s (%s) did not start: %s%s", m.Name, m.Command, reason, p.lastWords())
	}
	p.conn = raw.(*grpc.ClientConn)
	p.plugin = pluginpb.NewPluginClient(p.conn)
	p.source = pluginpb.NewSourceClient(p.conn)
	p.sink = pluginpb.NewSinkClient(p.conn)
	p.transform = pluginpb.NewTransformClient(p.conn)
	return p, nil
}

// kill ends the process (and its process group) at once; why is kept for
// the reason of calls that fail afterwards.
func (p *grpcProcess) kill(why string) {
	p.killOnce.Do(func() {
		p.why_ = why
		if p.pid_ > 0 && !p.client.Exited() {
			killGroup(p.pid_)
		}
		done := make(chan struct{})
		go func() {
			p.client.Kill() // the process is dead: this only cleans up
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		p.stderr.Flush()
		p.stdout.Flush()
		close(p.killed)
	})
}

// shutdown asks the process to exit (go-plugin's Shutdown), and kills it
// when it does not within a few seconds.
func (p *grpcProcess) shutdown() {
	p.killOnce.Do(func() {
		p.why_ = "it was closed"
		done := make(chan struct{})
		go func() {
			p.client.Kill() // graceful first, then a kill after 2 s
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			if p.pid_ > 0 {
				killGroup(p.pid_)
			}
			<-done
		}
		p.stderr.Flush()
		p.stdout.Flush()
		close(p.killed)
	})
}

// exited describes how the process ended, or "" while it runs.
func (p *grpcProcess) exited() string {
	if !p.client.Exited() {
		return ""
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.String()
	}
	return "exited"
}

// lastWords is the last line the process wrote to standard error, for a
// failure's reason.
func (p *grpcProcess) lastWords() string { return lastWordsOf(p.stderr) }
