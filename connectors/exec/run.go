package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ferryhq/ferry/connector"
)

// maxEnvPayload is the longest payload FERRY_PAYLOAD carries: Linux
// limits one "NAME=value" string to 128 KiB (MAX_ARG_STRLEN).
const maxEnvPayload = 128<<10 - 64

// stderrInError is how much of stderr an error message carries.
const stderrInError = 200

// env returns the environment of one run.
func (s *Sink) env(m *connector.Message) ([]string, error) {
	env := make([]string, 0, len(s.environ)+len(Placeholders))
	env = append(env, s.environ...)
	switch {
	case bytes.IndexByte(m.Payload, 0) >= 0:
		if s.uses["payload"] {
			return nil, connector.Permanent(errors.New("the payload contains a NUL byte, which no argument or environment variable can carry; read the payload from standard input instead of {payload}"))
		}
	case len(m.Payload) > maxEnvPayload:
		if s.uses["payload"] {
			return nil, connector.Permanent(fmt.Errorf("the payload is %d bytes, more than an environment variable can carry (%d); read the payload from standard input instead of {payload}", len(m.Payload), maxEnvPayload))
		}
	default:
		env = append(env, "FERRY_PAYLOAD="+string(m.Payload))
	}
	return append(env,
		"FERRY_OFFSET="+strconv.FormatUint(m.Offset, 10),
		"FERRY_STREAM="+m.Stream,
		"FERRY_TOPIC="+m.Topic,
		"FERRY_PARTITION="+strconv.FormatUint(uint64(m.Partition), 10),
		"FERRY_ID="+uuid.UUID(m.ID).String(),
		"FERRY_TIMESTAMP="+strconv.FormatInt(max(m.Timestamp.UnixMicro(), 0), 10),
	), nil
}

// run runs the command for one message.
func (s *Sink) run(ctx context.Context, m *connector.Message) error {
	env, err := s.env(m)
	if err != nil {
		s.log.failed(m, err, nil, nil)
		return err
	}
	runCtx := ctx
	if s.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	cmd := osexec.CommandContext(runCtx, s.shell, "-c", s.script)
	cmd.Dir = s.dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(m.Payload)
	stdout, stderr := &capture{limit: s.limit}, &capture{limit: s.limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The shell and everything it started: the group has the shell's pid.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	start := time.Now()
	err = cmd.Run()
	if errors.Is(err, osexec.ErrWaitDelay) {
		// The command exited with status 0; something it left running
		// held its output open and was cut off.
		err = nil
	}
	raw := err
	switch {
	case ctx.Err() != nil:
		return ctx.Err() // stopping: the runtime reads the batch again
	case err != nil && runCtx.Err() != nil:
		err = fmt.Errorf("timed out after %s; its process group was killed", s.timeout)
	case err != nil:
		err = describe(err, stderr)
	}
	s.runs.record(m, start, raw, err, stdout, stderr)
	if err != nil {
		s.log.failed(m, err, stdout, stderr)
		return err
	}
	s.log.ran(m, stdout, stderr, s.verbose)
	return nil
}

// describe turns a run's error into one line with the start of stderr;
// a command that ran and failed is its message's failure, a shell that
// could not be started is marked connector.Unavailable.
func describe(err error, stderr *capture) error {
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		msg := "exit status " + strconv.Itoa(ee.ExitCode())
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = "killed by signal " + ws.Signal().String()
		}
		if first := stderr.firstLine(stderrInError); first != "" {
			msg += ": " + first
		}
		return errors.New(msg)
	}
	err = fmt.Errorf("start: %w", err)
	if errors.Is(err, syscall.E2BIG) {
		return err // this message's arguments or environment are too long
	}
	// The shell cannot be started at all (its working directory or the
	// shell went away, no processes left): no message is at fault.
	return connector.Unavailable(err)
}

// capture keeps the first limit bytes written to it and counts the rest.
type capture struct {
	limit int
	buf   []byte
	total int
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += len(p)
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String is the kept output, with a note when some was cut.
func (c *capture) String() string {
	if c == nil {
		return ""
	}
	s := strings.ToValidUTF8(string(c.buf), "\uFFFD")
	if c.total > len(c.buf) {
		s += fmt.Sprintf(" … [cut: %d bytes in all]", c.total)
	}
	return s
}

// firstLine is the first non-empty line of the output, at most n bytes.
func (c *capture) firstLine(n int) string {
	for _, line := range strings.Split(string(c.buf), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > n {
				for n > 0 && !utf8.RuneStart(line[n]) {
					n--
				}
				line = line[:n] + "…"
			}
			return strings.ToValidUTF8(line, "\uFFFD")
		}
	}
	return ""
}

// logger logs runs with the connector's logger.
type logger struct{ l *slog.Logger }

func newLogger(l *slog.Logger) logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return logger{l}
}

func msgAttrs(m *connector.Message) []any {
	return []any{"stream", m.Stream, "topic", m.Topic, "partition", m.Partition, "offset", m.Offset}
}

func (l logger) ran(m *connector.Message, stdout, stderr *capture, verbose bool) {
	if !verbose && stdout.total == 0 && stderr.total == 0 {
		return
	}
	l.l.Info("command ran", append(msgAttrs(m), "stdout", stdout.String(), "stderr", stderr.String())...)
}

func (l logger) failed(m *connector.Message, err error, stdout, stderr *capture) {
	l.l.Warn("command failed", append(msgAttrs(m), "error", err, "stdout", stdout.String(), "stderr", stderr.String())...)
}
