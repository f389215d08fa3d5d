package httpsink

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

// A receiver as the package doc asks receivers to be: it acts once per
// request id (answering a repeat with success), and refuses what it cannot
// take with 400.
type dedupingReceiver struct {
	mu     sync.Mutex
	seen   map[string]bool
	bodies []string
}

func (rc *dedupingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if strings.Contains(string(body), "refused by the dedupingReceiver") {
		http.Error(w, "bad record", http.StatusBadRequest)
		return
	}
	id := r.Header.Get(DefaultRequestIDHeader)
	if !rc.seen[id] {
		rc.seen[id] = true
		rc.bodies = append(rc.bodies, string(body))
	}
	w.WriteHeader(http.StatusOK)
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	rc := &dedupingReceiver{seen: map[string]bool{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := New(connector.Config{Key: "hook", Plugin: connector.PluginConfig{Source: "hook.toml", Values: map[string]any{
				"url": srv.URL + "/in", "batch_mode": "individual", "include_metadata": false, "max_retries": int64(0)}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Read: func(t *testing.T) []string {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			return slices.Clone(rc.bodies)
		},
		Idempotent: true, // by request id, which repeats for a batch delivered again
		Poison:     []byte(`{"note":"refused by the dedupingReceiver"}`),
	})
}
