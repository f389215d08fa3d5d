package webhook

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/webhooksig"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
)

// idNamespace is the UUID v5 namespace of message ids: a message's id is
// UUIDv5(idNamespace, endpoint path + "\x00" + the provider's delivery id).
var idNamespace = uuid.MustParse("8d5f3a52-3c1e-4a53-9f0e-6c0b7e1f2a40")

// MessageID is the Iggy message id the source gives a delivery with the
// provider's delivery id deliveryID on the endpoint at path.
func MessageID(path, deliveryID string) [16]byte {
	return uuid.NewSHA1(idNamespace, []byte(path+"\x00"+deliveryID))
}

// maxHeaderValue is the longest Iggy header value.
const maxHeaderValue = 255

// ServeHTTP answers one webhook request; see the package doc for the
// statuses.
func (s *Source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep := s.set.endpoints[r.URL.Path]
	if ep == nil || (!ep.expiresAt.IsZero() && !s.now().Before(ep.expiresAt)) {
		answer(w, http.StatusNotFound, "not found")
		return
	}
	if r.Method != ep.method {
		w.Header().Set("Allow", ep.method)
		answer(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.busy(w)
		return
	}
	if r.ContentLength > s.set.maxBody {
		w.Header().Set("Connection", "close")
		answer(w, http.StatusRequestEntityTooLarge, "payload too large")
		return
	}
	body, err := readBody(w, r, s.set.maxBody)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		answer(w, http.StatusRequestEntityTooLarge, "payload too large")
		return
	case err != nil:
		answer(w, http.StatusBadRequest, "bad request")
		return
	case len(body) == 0:
		answer(w, http.StatusBadRequest, "empty body")
		return
	}
	deliveryID, err := s.verify(ep, r, body)
	if err != nil {
		s.log.Warn("webhook refused: verification failed", "endpoint", ep.path, "verify", ep.verify, "remote", r.RemoteAddr, "reason", err)
		answer(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	payload, schema, err := convert(ep.format, r, body)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errContentType) {
			status = http.StatusUnsupportedMediaType
		}
		answer(w, status, err.Error())
		return
	}
	d := &delivery{schema: schema, done: make(chan struct{})}
	if deliveryID != "" {
		d.id, d.dedup = MessageID(ep.path, deliveryID), true
	} else {
		d.id = uuid.New()
	}
	d.msg = connector.Message{ID: d.id, Payload: payload, OriginTimestamp: s.now(), Route: ep.route, Headers: s.headers(ep, r, deliveryID)}
	d, dup, err := s.admit(d)
	switch {
	case dup:
		answer(w, http.StatusOK, "duplicate")
		return
	case errors.Is(err, errBusy):
		s.busy(w)
		return
	case err != nil:
		s.unavailable(w)
		return
	}
	timer := time.NewTimer(s.set.waitTimeout)
	defer timer.Stop()
	select {
	case <-d.done:
		if d.err != nil {
			s.unavailable(w)
			return
		}
		answer(w, http.StatusOK, "stored")
	case <-timer.C:
		s.unavailable(w)
	case <-r.Context().Done():
	}
}

var errBusy = errors.New("too many deliveries waiting")

// admit queues d, or returns the delivery with its id already waiting
// (a retry joins it), or dup when its id is in the window.
func (s *Source) admit(d *delivery) (_ *delivery, dup bool, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, errClosing
	}
	if d.dedup {
		if w := s.inflight[d.id]; w != nil {
			return w, false, nil
		}
		// Forget what is past dedup_window first: without deliveries
		// being polled nothing else expires the window.
		s.win.expire(s.now())
		if s.win.has(d.id) {
			return nil, true, nil
		}
	}
	if len(s.inflight) >= s.set.maxPending {
		return nil, false, errBusy
	}
	s.inflight[d.id] = d
	s.queue = append(s.queue, d)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return d, false, nil
}

func (s *Source) busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", s.set.retryAfter)
	answer(w, http.StatusTooManyRequests, "too many requests")
}

func (s *Source) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", s.set.retryAfter)
	answer(w, http.StatusServiceUnavailable, "not stored yet; retry")
}

// answer writes {"status": ...} for 2xx and {"error": ...} otherwise.
func answer(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	key := "error"
	if status/100 == 2 {
		key = "status"
	}
	b, _ := json.Marshal(map[string]string{key: text})
	_, _ = w.Write(append(b, '\n'))
}

// readBody reads at most limit bytes; more is an *http.MaxBytesError.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > 0 {
		buf := make([]byte, r.ContentLength)
		n, err := io.ReadFull(rd, buf)
		if err != nil {
			return nil, err
		}
		// Nothing may follow a body of its declared length.
		if _, err := rd.Read(make([]byte, 1)); err != io.EOF && err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	return io.ReadAll(rd)
}

// verify checks the request with the endpoint's scheme and returns the
// provider's delivery id ("" when there is none). Errors never hold a
// secret.
func (s *Source) verify(ep *endpoint, r *http.Request, body []byte) (string, error) {
	var id string
	var err error
	switch ep.verify {
	case VerifyStandard:
		id, err = webhooksig.VerifyStandard(ep.secrets, r.Header, body, ep.tolerance, s.now())
	case VerifyGitHub:
		err = webhooksig.GitHub.Verify(ep.secrets, r.Header.Get(webhooksig.GitHubHeader), body)
		id = r.Header.Get("X-GitHub-Delivery")
	case VerifyStripe:
		err = webhooksig.VerifyStripe(ep.secrets, r.Header.Get(webhooksig.StripeHeader), body, ep.tolerance, s.now())
		if err == nil {
			id = gjson.GetBytes(body, "id").String()
		}
	case VerifyHMAC:
		err = ep.hmac.Verify(ep.secrets, r.Header.Get(ep.header), body)
	case VerifyBearer:
		tok, ok := credentials(r, "Bearer")
		if !ok || !anyEqual(ep.secrets, tok) {
			err = errors.New("no matching bearer token")
		}
	case VerifyBasic:
		// user-id ":" password, base64 (RFC 7617 section 2); compared
		// whole with the configured user:password.
		cred, ok := credentials(r, "Basic")
		var userPass []byte
		if ok {
			var decErr error
			userPass, decErr = base64.StdEncoding.DecodeString(cred)
			ok = decErr == nil && bytes.IndexByte(userPass, ':') >= 0
		}
		if !ok || !anyEqual(ep.secrets, string(userPass)) {
			err = errors.New("no matching basic credentials")
		}
	}
	if err != nil {
		return "", err
	}
	if ep.idHeader != "" {
		id = r.Header.Get(ep.idHeader)
	}
	return id, nil
}

// credentials is what follows scheme in the request's one Authorization
// field: credentials = auth-scheme 1*SP token68 (RFC 9110 section 11.4),
// the scheme matched case-insensitively (RFC 9110 section 11.1, RFC 7617
// section 2, RFC 6750 section 2.1). Two Authorization fields (a singleton
// field sent twice) are refused.
func credentials(r *http.Request, scheme string) (string, bool) {
	vs := r.Header.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	got, rest, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(got, scheme) {
		return "", false
	}
	rest = strings.TrimLeft(rest, " ")
	return rest, rest != ""
}

// anyEqual compares got with each secret in constant time.
func anyEqual(secrets [][]byte, got string) bool {
	// Digests of equal length, so the time taken tells nothing of a
	// secret's length either.
	g := sha256.Sum256([]byte(got))
	ok := 0
	for _, s := range secrets {
		d := sha256.Sum256(s)
		ok |= subtle.ConstantTimeCompare(d[:], g[:])
	}
	return ok == 1
}

var errContentType = errors.New("unsupported content type")

// convert makes the payload of a body in the endpoint's format.
func convert(format string, r *http.Request, body []byte) ([]byte, connector.Schema, error) {
	switch format {
	case FormatJSON:
		if !json.Valid(body) {
			return nil, "", errors.New("the body is not JSON")
		}
		return body, connector.SchemaJSON, nil
	case FormatForm:
		ct := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]))
		if ct != "application/x-www-form-urlencoded" {
			return nil, "", fmt.Errorf("%w: expected application/x-www-form-urlencoded", errContentType)
		}
		obj, err := formJSON(body)
		if err != nil {
			return nil, "", err
		}
		return obj, connector.SchemaJSON, nil
	}
	return body, connector.SchemaRaw, nil
}

// headers are the Iggy headers of a delivery: the forwarded request
// headers, then the metadata.
func (s *Source) headers(ep *endpoint, r *http.Request, deliveryID string) []connector.Header {
	var hs []connector.Header
	for _, name := range s.set.forward {
		if vs := r.Header.Values(name); len(vs) > 0 {
			hs = append(hs, connector.StringHeader(name, cut(strings.Join(vs, ", "), maxHeaderValue)))
		}
	}
	if s.set.metadata {
		hs = append(hs, connector.StringHeader("iggy_source_instance", cut(s.set.instance, maxHeaderValue)),
			connector.StringHeader("iggy_http_remote_addr", cut(r.RemoteAddr, maxHeaderValue)),
			header.New("iggy_http_received_at", header.Uint64Value(uint64(s.now().UnixMicro()))),
			connector.StringHeader("webhook_endpoint", cut(ep.path, maxHeaderValue)))
		if deliveryID != "" {
			hs = append(hs, connector.StringHeader("webhook_delivery_id", cut(deliveryID, maxHeaderValue)))
		}
	}
	return hs
}

// cut shortens s to at most n bytes, on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// retryAfterSeconds is d as a Retry-After value.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
