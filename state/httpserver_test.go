package state

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stateServer implements the HTTP state protocol for tests, strictly: it
// keeps state in a map with real ETags, requires the Authorization header,
// requires exactly one conditional header and an Idempotency-Key on every
// write, and replays the recorded answer when a write's Idempotency-Key is
// seen again (answering 422 if the key is reused for a different request).
type stateServer struct {
	*httptest.Server
	auth string

	mu       sync.Mutex
	states   map[string]srvState // by URL path
	seq      int                 // last ETag number
	replays  map[string]srvReply // by Idempotency-Key
	requests []srvRequest
	applied  int // writes that changed the map

	// before, if set, runs first for every request (outside the lock) and
	// handles it if it returns true. n counts requests, from 1.
	before func(w http.ResponseWriter, r *http.Request, n int) bool
	// afterApply, if set, runs after a write changed the map and before the
	// answer is written; returning true means it handled (or dropped) the
	// answer. n counts applied writes, from 1.
	afterApply func(w http.ResponseWriter, r *http.Request, n int) bool
}

type srvState struct {
	data []byte
	etag string
}

type srvReply struct {
	method, path string
	body         []byte
	status       int
	etag         string
}

type srvRequest struct {
	Method, Path, Query              string
	IdempotencyKey, IfMatch, IfNone  string
	Authorization, ContentType, Body string
	Header                           http.Header
}

func newStateServer(t *testing.T) *stateServer {
	t.Helper()
	s := &stateServer{
		auth:    "Bearer test-" + t.Name(),
		states:  map[string]srvState{},
		replays: map[string]srvReply{},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// snapshot returns the request log and the number of applied writes.
func (s *stateServer) snapshot() ([]srvRequest, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]srvRequest(nil), s.requests...), s.applied
}

func (s *stateServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, srvRequest{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		IfMatch:        r.Header.Get("If-Match"), IfNone: r.Header.Get("If-None-Match"),
		Authorization: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"),
		Body: string(body), Header: r.Header.Clone(),
	})
	n := len(s.requests)
	s.mu.Unlock()

	if s.before != nil && s.before(w, r, n) {
		return
	}
	if r.Header.Get("Authorization") != s.auth {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, r)
	case http.MethodPut, http.MethodDelete:
		s.write(w, r, body)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *stateServer) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st, ok := s.states[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no state", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", st.etag)
	_, _ = w.Write(st.data)
}

func (s *stateServer) write(w http.ResponseWriter, r *http.Request, body []byte) {
	ik := r.Header.Get("Idempotency-Key")
	if ik == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	path := r.URL.Path
	s.mu.Lock()
	if prev, ok := s.replays[ik]; ok {
		s.mu.Unlock()
		if prev.method != r.Method || prev.path != path || !bytes.Equal(prev.body, body) {
			http.Error(w, "Idempotency-Key reused for a different request", http.StatusUnprocessableEntity)
			return
		}
		if prev.etag != "" {
			w.Header().Set("ETag", prev.etag)
		}
		w.WriteHeader(prev.status)
		return
	}
	reply, problem := s.applyLocked(r, path, body)
	if problem == 0 {
		reply.method, reply.path, reply.body = r.Method, path, body
		s.replays[ik] = reply
		s.applied++
	}
	applied := s.applied
	s.mu.Unlock()

	if problem != 0 {
		http.Error(w, http.StatusText(problem), problem)
		return
	}
	if s.afterApply != nil && s.afterApply(w, r, applied) {
		return
	}
	if reply.etag != "" {
		w.Header().Set("ETag", reply.etag)
	}
	w.WriteHeader(reply.status)
}

// applyLocked checks the preconditions and changes the map; problem is the
// failure status, or 0.
func (s *stateServer) applyLocked(r *http.Request, path string, body []byte) (reply srvReply, problem int) {
	cur, exists := s.states[path]
	if r.Method == http.MethodDelete {
		if !exists {
			return reply, http.StatusNotFound
		}
		delete(s.states, path)
		return srvReply{status: http.StatusNoContent}, 0
	}
	ifMatch, ifNone := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	switch {
	case (ifMatch == "") == (ifNone == ""):
		return reply, http.StatusPreconditionRequired
	case ifNone != "" && ifNone != "*":
		return reply, http.StatusBadRequest
	case ifNone == "*" && exists:
		return reply, http.StatusPreconditionFailed
	case ifMatch != "" && (!exists || cur.etag != ifMatch):
		return reply, http.StatusPreconditionFailed
	}
	s.seq++
	etag := fmt.Sprintf(`"%d-%x"`, s.seq, len(body))
	s.states[path] = srvState{data: bytes.Clone(body), etag: etag}
	status := http.StatusOK
	if !exists {
		status = http.StatusCreated
	}
	return srvReply{status: status, etag: etag}, 0
}

// dropConnection closes the client's connection without an answer.
func dropConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// sleepLog records the waits an HTTPStore asked for, without waiting.
type sleepLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (l *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	l.waits = append(l.waits, d)
	l.mu.Unlock()
	return ctx.Err()
}

func (l *sleepLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

// newTestHTTPStore returns a store for srv whose backoff waits are recorded
// in the returned store's sleepLog instead of slept.
func newTestHTTPStore(t *testing.T, srv *stateServer, opts ...HTTPOption) *HTTPStore {
	t.Helper()
	s, err := NewHTTP(srv.URL+"/v1/state", opts...)
	require.NoError(t, err)
	s.sleep = (&sleepLog{}).sleep
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
