package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// linesProcess is one running plugin process on the line protocol
// (plugin/lines.go, docs/plugins.md): newline-delimited JSON on its
// standard input and output. It gives the contract's calls as the gRPC
// client interfaces do, so the adapters and the supervisor treat it as
// they treat a gRPC plugin:
//
//   - Sink.Open writes the open line; Consume writes a batch line and
//     waits for the result line of its seq (a result of an older seq is
//     the late answer of a call abandoned by its caller, and is skipped).
//   - Source.Open writes the open line with the saved state; Poll waits
//     up to its max_wait_ms for the next line the plugin wrote (batch,
//     end or error); Ack and Nack write ack and nack lines. A source
//     whose process exits with status 0 after its last line has ended its
//     input.
//   - Close does nothing; shutdown closes the plugin's standard input,
//     which tells it to exit, and kills it after closeGrace.
//
// A line that is not protocol JSON, or longer than limits.max_line, is a
// garbage answer: the supervisor kills the process, and the batch in
// flight is replayed.
type linesProcess struct {
	m      *plugin.Manifest
	cmd    *exec.Cmd
	pid_   int
	stderr *LogWriter
	stdin  *os.File // the runtime's end of the plugin's standard input
	stdout *os.File // the runtime's end of its standard output

	lines    chan []byte   // lines of its standard output, in order
	readErr  error         // why reading stopped; set before readDone closes
	readDone chan struct{} // closed when reading stopped
	errDone  chan struct{} // closed when its standard error ended
	waited   chan struct{} // closed when the process was waited for
	state    string        // how it exited; set before waited closes
	success  bool          // it exited with status 0

	writeMu sync.Mutex
	calls   chan struct{} // holds one token: one call reads answers at a time
	seq     uint64        // sink: batches sent; source: batches read (with calls held)

	killOnce sync.Once
	killed   chan struct{}
	why_     string
}

var _ proc = (*linesProcess)(nil)

// closeGrace is how long a plugin on the line protocol has to exit after
// its standard input was closed.
const closeGrace = 2 * time.Second

// errGone is a call's failure when the process ended its output.
var errGone = errors.New("its standard output ended")

func startLines(m *plugin.Manifest, log *slog.Logger) (*linesProcess, error) {
	cmd, limited := Command(m)
	p := &linesProcess{m: m, cmd: cmd, stderr: NewLogWriter(log, "stderr"), lines: make(chan []byte),
		readDone: make(chan struct{}), errDone: make(chan struct{}), waited: make(chan struct{}),
		calls: make(chan struct{}, 1), killed: make(chan struct{})}
	p.calls <- struct{}{}
	var child []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, err
	}
	child = []*os.File{inR, outW, errW}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	for _, f := range child {
		f.Close()
	}
	if err != nil {
		for _, f := range []*os.File{inW, outR, errR} {
			f.Close()
		}
		return nil, fmt.Errorf("plugin %s (%s) did not start: %v", m.Name, m.Command, err)
	}
	p.pid_, p.stdin, p.stdout = cmd.Process.Pid, inW, outR
	go func() {
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
		p.stderr.Flush()
		close(p.errDone)
	}()
	go func() {
		_ = cmd.Wait()
		p.state, p.success = cmd.ProcessState.String(), cmd.ProcessState.Success()
		close(p.waited)
	}()
	go p.read()
	if !limited {
		if err := ApplyLimits(p.pid_, m.Limits.MemoryLimit); err != nil {
			p.kill("its memory limit could not be set")
			return nil, fmt.Errorf("plugin %s (%s) did not start: set its memory limit: %v", m.Name, m.Command, err)
		}
	}
	return p, nil
}

// read hands the lines of the plugin's standard output to calls, one at
// a time, until it ends, breaks a bound or the process is killed.
func (p *linesProcess) read() {
	max := int(p.m.Limits.MaxLine)
	if max <= 0 {
		max = plugin.DefaultMaxLine
	}
	r := bufio.NewReaderSize(p.stdout, 64<<10)
	for {
		line, err := plugin.ReadLine(r, max)
		if err != nil {
			p.readErr = err
			close(p.readDone)
			return
		}
		select {
		case p.lines <- line:
		case <-p.killed:
			p.readErr = errors.New("the process was killed")
			close(p.readDone)
			return
		}
	}
}

// next is the next line the plugin wrote, waiting until ctx ends.
func (p *linesProcess) next(ctx context.Context) ([]byte, error) {
	select {
	case l := <-p.lines:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.readDone:
	}
	if errors.Is(p.readErr, plugin.ErrLineTooLong) {
		return nil, garbage{p.readErr}
	}
	p.settle(ctx)
	return nil, errGone
}

// settle waits a little for the process's exit and last words after its
// output ended, so that the failure's reason can name them.
func (p *linesProcess) settle(ctx context.Context) {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	for _, ch := range []chan struct{}{p.waited, p.errDone} {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// write writes one line within ctx's deadline. A line cut in the middle
// leaves the stream broken: the process is killed.
func (p *linesProcess) write(ctx context.Context, line []byte) error {
	p.writeMu.Lock()
	dl, _ := ctx.Deadline()
	_ = p.stdin.SetWriteDeadline(dl)
	n, err := p.stdin.Write(line)
	p.writeMu.Unlock() // kill takes it to close stdin
	if err == nil {
		return nil
	}
	if n > 0 {
		p.kill("a line to it was cut in the middle: " + err.Error())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if n == 0 && !dl.IsZero() {
			// Nothing of the line went in before the deadline: the pipe is
			// full, so the plugin does not read what the runtime writes.
			p.kill("it does not read its standard input: a line to it could not be written before the call's deadline")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return context.DeadlineExceeded
	}
	p.settle(ctx)
	return fmt.Errorf("write to its standard input: %w", err)
}

// take holds the right to read answers until release; it fails when ctx
// ends first.
func (p *linesProcess) take(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-p.calls:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *linesProcess) release() { p.calls <- struct{}{} }

func (p *linesProcess) pid() int              { return p.pid_ }
func (p *linesProcess) dead() <-chan struct{} { return p.killed }
func (p *linesProcess) why() string           { return p.why_ }
func (p *linesProcess) lastWords() string     { return lastWordsOf(p.stderr) }

func (p *linesProcess) exited() string {
	select {
	case <-p.waited:
		return p.state
	default:
		return ""
	}
}

func (p *linesProcess) rpc() rpcs {
	return rpcs{plugin: linesPlugin{}, source: linesSource{p}, sink: linesSink{p}}
}

func (p *linesProcess) kill(why string) {
	p.killOnce.Do(func() {
		p.why_ = why
		killGroup(p.pid_)
		p.end(10 * time.Second)
	})
}

func (p *linesProcess) shutdown() {
	p.killOnce.Do(func() {
		p.why_ = "it was closed"
		p.writeMu.Lock()
		p.stdin.Close()
		p.writeMu.Unlock()
		select {
		case <-p.waited:
		case <-time.After(closeGrace):
		}
		killGroup(p.pid_) // what it left running, too
		p.end(10 * time.Second)
	})
}

// end waits for the killed process and releases its pipes.
func (p *linesProcess) end(wait time.Duration) {
	select {
	case <-p.waited:
	case <-time.After(wait):
	}
	close(p.killed)
	p.writeMu.Lock()
	p.stdin.Close()
	p.writeMu.Unlock()
	p.stdout.Close() // ends a read still waiting (a writer outside its group)
	<-p.readDone
	select {
	case <-p.errDone:
	case <-time.After(time.Second):
	}
	p.stderr.Flush()
}

// linesPlugin is the Plugin service, which the line protocol lacks.
type linesPlugin struct{}

func (linesPlugin) Spec(context.Context, *pluginpb.SpecRequest, ...grpc.CallOption) (*pluginpb.SpecResponse, error) {
	return nil, errors.New("the line protocol has no Spec call: the manifest declares the settings")
}

// linesSink is the Sink service on the line protocol.
type linesSink struct{ p *linesProcess }

func (s linesSink) Open(ctx context.Context, req *pluginpb.OpenRequest, _ ...grpc.CallOption) (*pluginpb.OpenResponse, error) {
	err := s.p.write(ctx, plugin.OpenLine(plugin.KindSink, req.Key, req.Name, req.ConfigJson, nil, req.Verbose))
	if err != nil {
		return nil, err
	}
	return &pluginpb.OpenResponse{}, nil
}

func (s linesSink) Consume(ctx context.Context, req *pluginpb.ConsumeRequest, _ ...grpc.CallOption) (*pluginpb.ConsumeResponse, error) {
	p := s.p
	if err := p.take(ctx); err != nil {
		return nil, err
	}
	defer p.release()
	p.seq++
	seq := p.seq
	if err := p.write(ctx, plugin.SinkBatchLine(seq, req)); err != nil {
		return nil, err
	}
	for {
		line, err := p.next(ctx)
		if err != nil {
			return nil, err
		}
		got, resp, err := plugin.DecodeResult(line)
		switch {
		case err != nil:
			return nil, garbagef("batch %d: %v", seq, err)
		case got > seq:
			return nil, garbagef("a result of batch %d, which was not sent (batch %d is)", got, seq)
		case got < seq:
			continue // the late answer to a call its caller gave up
		}
		return resp, nil
	}
}

func (linesSink) Close(context.Context, *pluginpb.CloseRequest, ...grpc.CallOption) (*pluginpb.CloseResponse, error) {
	return &pluginpb.CloseResponse{}, nil
}

// linesSource is the Source service on the line protocol.
type linesSource struct{ p *linesProcess }

func (s linesSource) Open(ctx context.Context, req *pluginpb.OpenRequest, _ ...grpc.CallOption) (*pluginpb.OpenResponse, error) {
	err := s.p.write(ctx, plugin.OpenLine(plugin.KindSource, req.Key, req.Name, req.ConfigJson, req.State, req.Verbose))
	if err != nil {
		return nil, err
	}
	return &pluginpb.OpenResponse{}, nil
}

func (s linesSource) Poll(ctx context.Context, req *pluginpb.PollRequest, _ ...grpc.CallOption) (*pluginpb.PollResponse, error) {
	p := s.p
	if err := p.take(ctx); err != nil {
		return nil, err
	}
	defer p.release()
	wctx, cancel := context.WithTimeout(ctx, time.Duration(req.MaxWaitMs)*time.Millisecond)
	defer cancel()
	line, err := p.next(wctx)
	switch {
	case err == nil:
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &pluginpb.PollResponse{}, nil // nothing yet
	case errors.Is(err, errGone) && p.exited() != "" && p.success:
		return &pluginpb.PollResponse{EndOfInput: true}, nil
	default:
		return nil, err
	}
	sl, err := plugin.DecodeSourceLine(line)
	switch {
	case err != nil:
		return nil, garbagef("%v", err)
	case sl.End:
		return &pluginpb.PollResponse{EndOfInput: true}, nil
	case sl.Error != nil:
		return &pluginpb.PollResponse{Error: sl.Error}, nil
	}
	p.seq++
	if sl.Batch.Seq == 0 {
		sl.Batch.Seq = p.seq
	}
	return &pluginpb.PollResponse{Batch: sl.Batch}, nil
}

func (s linesSource) Ack(ctx context.Context, req *pluginpb.AckRequest, _ ...grpc.CallOption) (*pluginpb.AckResponse, error) {
	if err := s.p.write(ctx, plugin.AckLine(req.Seq)); err != nil {
		return nil, err
	}
	return &pluginpb.AckResponse{}, nil
}

func (s linesSource) Nack(ctx context.Context, req *pluginpb.NackRequest, _ ...grpc.CallOption) (*pluginpb.NackResponse, error) {
	if err := s.p.write(ctx, plugin.NackLine(req.Seq, req.Cause)); err != nil {
		return nil, err
	}
	return &pluginpb.NackResponse{}, nil
}

func (linesSource) Close(context.Context, *pluginpb.CloseRequest, ...grpc.CallOption) (*pluginpb.CloseResponse, error) {
	return &pluginpb.CloseResponse{}, nil
}
