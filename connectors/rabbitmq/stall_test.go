package rabbitmq

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// stallProxy forwards TCP connections to a RabbitMQ. On the first
// connection only, from the moment the client sends the method named by
// class and method on a channel, it stops passing the client's channel
// frames to the server: that RPC and all after it get no answer, while
// the connection itself stays alive (the heartbeats on channel 0 still
// pass both ways). That is a server stuck on a channel, as one that is
// still booting or is blocked can be; amqp091 waits for the answer until
// the connection closes.
type stallProxy struct {
	ln            net.Listener
	target        string
	class, method uint16
	conns         atomic.Int32
	stalled       atomic.Bool // the stall began
	refuse        atomic.Bool // new connections are closed at once
	wg            sync.WaitGroup

	mu    sync.Mutex
	socks []net.Conn // every socket of the proxy, closed at the end
	done  bool
	once  sync.Once
}

// AMQP method ids (class, method) of the calls the connectors make.
const (
	classChannel, classExchange, classQueue, classBasic, classConfirm = 20, 40, 50, 60, 85
)

func newStallProxy(t *testing.T, amqpURL string, class, method uint16) (*stallProxy, string) {
	t.Helper()
	u, err := url.Parse(amqpURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: u.Host, class: class, method: method}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

// close stops the proxy and closes its connections, the stuck ones too
// (which ends a call still blocked on one). Tests call it again in a
// cleanup of their own registered after the connector's Close, so it
// runs first: without the fix, Close waits on the stuck call's lock.
func (p *stallProxy) close() {
	p.once.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		p.done = true
		for _, c := range p.socks {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

func (p *stallProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.socks = append(p.socks, c, s)
		p.mu.Unlock()
		first := p.conns.Add(1) == 1
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, s)
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.clientToServer(c, s, first)
			s.Close()
		}()
	}
}

// clientToServer passes the protocol header, then frame by frame, and
// drops the channel frames from the stalling method on.
func (p *stallProxy) clientToServer(c, s net.Conn, first bool) {
	r := bufio.NewReader(c)
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return
	}
	if _, err := s.Write(hdr); err != nil {
		return
	}
	stalled := false
	for {
		// type (1), channel (2), size (4), payload, frame end (1)
		if _, err := io.ReadFull(r, hdr[:7]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(hdr[3:7])
		if size > 1<<24 {
			return
		}
		frame := make([]byte, 7+int(size)+1)
		copy(frame, hdr[:7])
		if _, err := io.ReadFull(r, frame[7:]); err != nil {
			return
		}
		channel := binary.BigEndian.Uint16(frame[1:3])
		if first && !stalled && frame[0] == 1 && channel != 0 && size >= 4 &&
			binary.BigEndian.Uint16(frame[7:9]) == p.class && binary.BigEndian.Uint16(frame[9:11]) == p.method {
			stalled = true
			p.stalled.Store(true)
		}
		if stalled && channel != 0 {
			continue
		}
		if _, err := s.Write(frame); err != nil {
			return
		}
	}
}

// within runs f and waits for it for at most bound, a liveness bound far
// above what f should take: a call that is still blocked then fails the
// test with the goroutines' stacks. It returns f's error and logs how
// long f took.
func within(t *testing.T, bound time.Duration, what string, f func() error) error {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Logf("%s returned after %s: %v", what, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s still blocked after %s (a broker call without a bound):\n%s", what, bound, buf[:goruntime.Stack(buf, true)])
		return nil
	}
}

// stallBound is the liveness bound of one call of a connector whose
// timeout_secs is 1.
const stallBound = 45 * time.Second

// Every broker call of the sink, stuck on a server that keeps the
// connection alive but does not answer, gives up after timeout_secs with
// an Unavailable error and closes the connection; the next call dials
// again and gets through.
func TestSinkGivesUpAStuckBrokerCall(t *testing.T) {
	t.Parallel()
	srv := amqptest.URL(t)
	for _, c := range []struct {
		name          string
		class, method uint16
	}{
		{"channel.open", classChannel, 10},
		{"exchange.declare", classExchange, 10},
		{"confirm.select", classConfirm, 10},
		{"basic.publish", classBasic, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			exchange := amqptest.Name(t, "x")
			ch, q := queueOn(t, srv, exchange, "iggy.messages")
			p, proxied := newStallProxy(t, srv, c.class, c.method)
			s, err := NewSink(cfg(map[string]any{"amqp_url": proxied, "exchange": exchange, "max_retries": int64(0),
				"timeout_secs": int64(1)}))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			t.Cleanup(p.close)
			ctx := context.Background()
			body := `{"stuck":"` + c.name + `"}`
			batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON,
				Messages: []connector.Message{{ID: uuid.New(), Payload: []byte(body)}}}

			opened := false
			var errs []error
			for try := 0; try < 3; try++ {
				err := within(t, stallBound, "Open", func() error { return s.Open(ctx) })
				if err == nil {
					opened = true
					break
				}
				errs = append(errs, err)
			}
			require.True(t, opened, "Open never got through: %v", errs)
			var published bool
			for try := 0; try < 3 && !published; try++ {
				err := within(t, stallBound, "Consume", func() error { return s.Consume(ctx, batch) })
				if err == nil {
					published = true
					break
				}
				errs = append(errs, err)
			}
			require.True(t, published, "Consume never got through: %v", errs)
			require.True(t, p.stalled.Load(), "the proxy stalled %s", c.name)
			require.NotEmpty(t, errs, "the stuck call failed")
			for _, err := range errs {
				require.True(t, connector.IsUnavailable(err), "a stuck call is Unavailable (the runtime retries it): %v", err)
			}
			require.GreaterOrEqual(t, p.conns.Load(), int32(2), "the sink dialled again")
			require.Contains(t, collect(t, ch, q, 1)[0], c.name)
		})
	}
}

// The source's Open, stuck in any of its calls, gives up after
// timeout_secs and closes the connection; the next Open gets through and
// the source consumes.
func TestSourceGivesUpAStuckBrokerCall(t *testing.T) {
	t.Parallel()
	srv := amqptest.URL(t)
	for _, c := range []struct {
		name          string
		class, method uint16
	}{
		{"channel.open", classChannel, 10},
		{"queue.declare", classQueue, 10},
		{"exchange.declare", classExchange, 10},
		{"queue.bind", classQueue, 20},
		{"basic.qos", classBasic, 10},
		{"basic.consume", classBasic, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := amqptest.Name(t, "q")
			p, proxied := newStallProxy(t, srv, c.class, c.method)
			src, err := NewSource(cfg(map[string]any{"amqp_url": proxied, "queue": q, "exchange": amqptest.Name(t, "x"),
				"timeout_secs": int64(1), "batch_wait": "1ms"}))
			require.NoError(t, err)
			t.Cleanup(func() { _ = src.Close(context.Background()) })
			t.Cleanup(p.close)
			ctx := context.Background()
			var errs []error
			opened := false
			for try := 0; try < 3; try++ {
				err := within(t, stallBound, "Open", func() error { return src.Open(ctx, nil) })
				if err == nil {
					opened = true
					break
				}
				errs = append(errs, err)
			}
			require.True(t, opened, "Open never got through: %v", errs)
			require.True(t, p.stalled.Load(), "the proxy stalled %s", c.name)
			require.Len(t, errs, 1, "the stuck call failed, the next Open got through")
			require.True(t, errors.Is(errs[0], context.DeadlineExceeded), "the stuck call timed out: %v", errs[0])
			sent := publish(t, srv, q, 0, 1)
			pctx, cancel := context.WithTimeout(ctx, stallBound)
			defer cancel()
			b, err := src.Poll(pctx)
			require.NoError(t, err)
			require.Equal(t, sent[0], string(b.Messages[0].Payload))
			require.NoError(t, src.(connector.Acker).Ack(ctx, b))
		})
	}
}
