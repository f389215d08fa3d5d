package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/webhooksig"
)

// provider is a webhook sender as providers behave: each delivery is
// signed (Standard Webhooks) and retried on any non-2xx answer or error
// until it gets a 2xx, keeping its delivery id.
type provider struct {
	url    string
	key    []byte
	client *http.Client

	mu       sync.Mutex
	answered map[string]int // delivery id → the 2xx status it got
	attempts atomic.Int64
}

func newProvider(t testing.TB, url string) *provider {
	return &provider{url: url, key: testKey(t), answered: map[string]int{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
}

// deliver posts body as delivery id until a 2xx or ctx ends; it reports
// whether a 2xx came.
func (p *provider) deliver(ctx context.Context, id string, body []byte) bool {
	for wait := 10 * time.Millisecond; ; wait = min(wait*2, 200*time.Millisecond) {
		p.attempts.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			return false
		}
		webhooksig.SetStandardHeaders(req.Header, [][]byte{p.key}, id, time.Now(), body)
		req.Header.Set("Content-Type", "application/json")
		if res, err := p.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body) // so the connection is reused
			res.Body.Close()
			if res.StatusCode/100 == 2 {
				p.mu.Lock()
				p.answered[id] = res.StatusCode
				p.mu.Unlock()
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// acknowledged is how many deliveries got a 2xx.
func (p *provider) acknowledged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.answered)
}

// sequential delivers what is queued one at a time, in order, each until
// it gets a 2xx, until the test ends.
type sequential struct {
	p     *provider
	queue chan [2]string // id, body
}

func newSequential(t testing.TB, p *provider) *sequential {
	s := &sequential{p: p, queue: make(chan [2]string, 10000)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case d := <-s.queue:
				p.deliver(ctx, d[0], []byte(d[1]))
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}
