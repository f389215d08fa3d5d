package httpsink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// receiver is a real HTTP endpoint on a loopback port. It records the
// "n" of every message it accepts; it can answer 500 for a while, or stop
// listening (connections are refused) and listen again on the same port.
type receiver struct {
	t    *testing.T
	addr string

	mu      sync.Mutex
	got     map[int]int // n → times received
	failing bool
	srv     *http.Server
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &receiver{t: t, addr: l.Addr().String(), got: map[int]int{}}
	r.serve(l)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.srv != nil {
			_ = r.srv.Close()
		}
	})
	return r
}

func (r *receiver) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
		return
	}
	sc := bufio.NewScanner(&body) // one JSON document, or NDJSON lines
	for sc.Scan() {
		var v struct{ N *int }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil || v.N == nil {
			http.Error(w, "not a message", http.StatusBadRequest)
			return
		}
		r.got[*v.N]++
	}
	w.WriteHeader(http.StatusOK)
}

func (r *receiver) setFailing(on bool) {
	r.mu.Lock()
	r.failing = on
	r.mu.Unlock()
}

// stop closes the listener and every connection: connections are refused.
func (r *receiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	require.NoError(r.t, srv.Close())
}

// restart listens on the same port again.
func (r *receiver) restart() {
	var l net.Listener
	await(r.t, "listening again on "+r.addr, time.Minute, func() bool {
		var err error
		l, err = net.Listen("tcp", r.addr)
		return err == nil
	})
	r.serve(l)
}

// missing lists the n in [0, total) not received yet.
func (r *receiver) missing(total int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for n := range total {
		if r.got[n] == 0 {
			out = append(out, n)
		}
	}
	return out
}

// await polls cond until it holds, failing the test after limit (a
// liveness bound, not a timing assertion).
func await(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holdOutage returns at until, or later if need be, once reported holds
// or a minute after until; it returns whether reported held. The outage
// lasts until it returns.
func holdOutage(until time.Time, reported func() bool) bool {
	for {
		ok := reported()
		if now := time.Now(); (ok && now.After(until)) || now.After(until.Add(time.Minute)) {
			return ok
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outage is one way for the endpoint to be down.
type outage struct {
	name       string
	begin, end func(*receiver)
}

var (
	answer500 = outage{"500", func(r *receiver) { r.setFailing(true) }, func(r *receiver) { r.setFailing(false) }}
	refused   = outage{"refused", (*receiver).stop, (*receiver).restart}
)

// TestEndpointOutageDeadLettersNothing runs the http sink in the real
// runtime while its endpoint is down mid-stream, answering 500 for 20 s or
// refusing connections for 15 s (3 s each with -short), in individual and
// ndjson modes: once it is back every message arrives, none is
// dead-lettered, and while it is down the sink's last error says the
// destination is unavailable.
func TestEndpointOutageDeadLettersNothing(t *testing.T) {
	t.Parallel()
	for _, o := range []struct {
		outage
		d time.Duration
	}{{answer500, 20 * time.Second}, {refused, 15 * time.Second}} {
		if testing.Short() {
			o.d = 3 * time.Second
		}
		for _, mode := range []string{ModeIndividual, ModeNDJSON} {
			t.Run(fmt.Sprintf("%s for %s, %s", o.name, o.d, mode), func(t *testing.T) {
				t.Parallel()
				endpointOutage(t, mode, o.outage, o.d)
			})
		}
	}
}

func endpointOutage(t *testing.T, mode string, o outage, d time.Duration) {
	const before, total = 20, 50
	rcv := startReceiver(t)
	rt := startRuntime(t, fmt.Sprintf(`
type = "sink"
key = "webhook"
path = "http"
[[streams]]
stream = "events"
topics = ["in"]
schema = "json"
consumer_group = "webhook-group"
batch_length = 10
max_retries = 2
retry_backoff = "50ms"
on_error = "dead_letter"
dead_letter_topic = "dlq"
[plugin_config]
url = "http://%s/hook"
batch_mode = %q
include_metadata = false
timeout = "2s"
max_retries = 2
retry_delay = "100ms"
`, rcv.addr, mode))
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	send := func(from, to int) {
		var msgs []iggy.Message
		for n := from; n < to; n++ {
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
		_, err := admin.SendMessages(context.Background(), iggy.NamedID("events"), iggy.NamedID("in"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}

	send(0, before)
	await(t, "the first messages delivered", time.Minute, func() bool { return len(rcv.missing(before)) == 0 })
	o.begin(rcv)
	began := time.Now()
	send(before, total)
	reported := holdOutage(began.Add(d), func() bool { // the outage lasts d
		i, err := rt.Connector(connector.KindSink, "webhook")
		return err == nil && strings.Contains(i.LastError, "destination unavailable")
	})
	o.end(rcv)

	// Restarts back off 1 s doubling to 1 min: delivery follows within
	// about a minute and a half of the endpoint's return.
	await(t, "every message delivered after the outage", 3*time.Minute, func() bool {
		return len(rcv.missing(total)) == 0
	})
	await(t, "the last offset committed", time.Minute, func() bool {
		off, err := admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("webhook-group")),
			iggy.NamedID("events"), iggy.NamedID("in"), iggy.Partition(0))
		return err == nil && off.StoredOffset == total-1
	})
	reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("events"), Topic: iggy.NamedID("dlq"),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	if !errors.Is(err, iggy.ErrTopicNotFound) { // never created: nothing was dead-lettered
		require.NoError(t, err)
		require.Empty(t, reply.Messages, "nothing is dead-lettered during an outage")
	}
	require.Empty(t, rcv.missing(total))
	require.True(t, reported, "while the endpoint was down the sink's last error said the destination is unavailable")
	i, err := rt.Connector(connector.KindSink, "webhook")
	require.NoError(t, err)
	require.Equal(t, runtime.StatusRunning, i.Status, i.LastError)
}
