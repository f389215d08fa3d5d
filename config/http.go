package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/internal/backoff"
)

// defaultTemplates are upstream's URL templates, by template name. A
// template is appended to base_url after {key} and {version} are replaced.
var defaultTemplates = map[string]string{
	"create_sink":              "/sinks/{key}/configs",
	"create_source":            "/sources/{key}/configs",
	"get_active_configs":       "/configs/active",
	"get_active_versions":      "/configs/active/versions",
	"set_active_sink":          "/sinks/{key}/configs/active",
	"set_active_source":        "/sources/{key}/configs/active",
	"get_sink_configs":         "/sinks/{key}/configs",
	"get_sink_config":          "/sinks/{key}/configs/{version}",
	"get_active_sink_config":   "/sinks/{key}/configs/active",
	"get_source_configs":       "/sources/{key}/configs",
	"get_source_config":        "/sources/{key}/configs/{version}",
	"get_active_source_config": "/sources/{key}/configs/active",
	"delete_sink_config":       "/sinks/{key}/configs",
	"delete_source_config":     "/sources/{key}/configs",
}

func templateNames() []string {
	out := make([]string, 0, len(defaultTemplates))
	for k := range defaultTemplates {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxResponse bounds the bytes read from one response.
const maxResponse = 32 << 20

// HTTPProvider is the "http" provider: connector configurations served by
// a remote API in upstream's shape, fetched with upstream's URL templates,
// request headers, timeout, retries and response paths.
type HTTPProvider struct {
	base      string
	templates map[string]string
	headers   map[string]string
	response  Response
	retry     Retry
	timeout   time.Duration
	client    *http.Client
	env       Env
	closeOnce sync.Once
}

var _ Provider = (*HTTPProvider)(nil)

// NewHTTPProvider returns a provider for cfg, the [connectors] section
// with config_type = "http".
func NewHTTPProvider(cfg Connectors, opts ...Option) (*HTTPProvider, error) {
	o := buildOptions(opts)
	var errs Errors
	cp := path{"connectors"}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, &FieldError{Key: cp.key("base_url").String(), Msg: "expected an http:// or https:// URL with a host"})
	}
	templates := make(map[string]string, len(defaultTemplates))
	for k, v := range defaultTemplates {
		templates[k] = v
	}
	for k, v := range cfg.URLTemplates {
		if _, ok := defaultTemplates[k]; !ok {
			errs = append(errs, &FieldError{Key: cp.key("url_templates").key(k).String(), Msg: "unknown URL template; known templates: " + strings.Join(templateNames(), ", ")})
			continue
		}
		templates[k] = v
	}
	for k, v := range cfg.RequestHeaders {
		if !validHeaderName(k) {
			errs = append(errs, &FieldError{Key: cp.key("request_headers").key(k).String(), Msg: "not a valid HTTP header name"})
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, &FieldError{Key: cp.key("request_headers").key(k).String(), Msg: "header values cannot contain line breaks or NUL"})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	client := o.client
	if client == nil {
		client = &http.Client{}
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &HTTPProvider{
		base: strings.TrimRight(cfg.BaseURL, "/"), templates: templates, headers: cfg.RequestHeaders,
		response: cfg.Response, retry: cfg.Retry, timeout: timeout, client: client, env: o.env,
	}, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Close releases idle connections; it is idempotent.
func (p *HTTPProvider) Close() error {
	p.closeOnce.Do(p.client.CloseIdleConnections)
	return nil
}

// url builds the URL of a template.
func (p *HTTPProvider) url(name, key string, version *uint64, query url.Values) string {
	t := p.templates[name]
	t = strings.ReplaceAll(t, "{key}", url.PathEscape(key))
	if version != nil {
		t = strings.ReplaceAll(t, "{version}", strconv.FormatUint(*version, 10))
	}
	u := p.base + t
	if len(query) > 0 {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + query.Encode()
	}
	return u
}

// response is one answered request.
type response struct {
	status int
	body   []byte
	url    string // redacted, for messages
}

// do sends a request, retrying connection failures, timeouts, 408, 429
// and 5xx answers with exponential backoff as [connectors.retry] says
// (max_attempts retries after the first request). 4xx answers are final.
func (p *HTTPProvider) do(ctx context.Context, method, rawURL string, body []byte) (*response, error) {
	shown := redactedURLString(rawURL)
	attempts := 1
	if p.retry.Enabled {
		attempts += int(p.retry.MaxAttempts)
	}
	var lastErr error
	waits := p.retry.Schedule()
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			if err := backoff.Sleep(ctx, waits.Next()); err != nil {
				return nil, fmt.Errorf("%s %s: %w (after %d attempts; last error: %v)", method, shown, err, attempt, lastErr)
			}
		}
		resp, err := p.once(ctx, method, rawURL, body)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s %s: %w", method, shown, ctx.Err())
			}
			lastErr = err
			continue
		}
		resp.url = shown
		if retryable(resp.status) && attempt+1 < attempts {
			lastErr = fmt.Errorf("HTTP %d", resp.status)
			continue
		}
		return resp, nil
	}
	return nil, fmt.Errorf("%s %s: %v (after %d attempts)", method, shown, lastErr, attempts)
}

func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

func (p *HTTPProvider) once(ctx context.Context, method, rawURL string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	res, err := p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named by the caller, redacted
		}
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("response larger than %d bytes", maxResponse)
	}
	return &response{status: res.StatusCode, body: data}, nil
}

// check turns a non-2xx answer into an error, with the API's message from
// error_path when it has one.
func (p *HTTPProvider) check(method string, r *response) error {
	if r.status >= 200 && r.status < 300 {
		return nil
	}
	msg := strings.TrimSpace(string(r.body))
	if p.response.ErrorPath != "" {
		if v, err := parseJSON(r.body); err == nil {
			if e, ok := navigate(v, p.response.ErrorPath); ok {
				msg = scalarText(e)
			}
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	err := fmt.Errorf("%s %s: HTTP %d: %s", method, r.url, r.status, msg)
	if r.status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", err, ErrNotFound)
	}
	return err
}

// extract applies [connectors.response]: an error at error_path (any
// value but null) fails the request; the payload is at data_path, or the
// whole body.
func (p *HTTPProvider) extract(method string, r *response) (any, error) {
	v, err := parseJSON(r.body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: invalid JSON response: %w", method, r.url, err)
	}
	if ep := p.response.ErrorPath; ep != "" {
		if e, ok := navigate(v, ep); ok {
			return nil, fmt.Errorf("%s %s: the API returned an error at %q: %s", method, r.url, ep, scalarText(e))
		}
	}
	if dp := p.response.DataPath; dp != "" {
		d, ok := navigate(v, dp)
		if !ok {
			return nil, fmt.Errorf("%s %s: data_path %q not found in the response; the response holds %s", method, r.url, dp, summarize(v))
		}
		return d, nil
	}
	return v, nil
}

// navigate follows a dot-separated path of object keys and array indexes.
// Null values were dropped by parseJSON, so they read as not found.
func navigate(v any, p string) (any, bool) {
	for _, part := range strings.Split(p, ".") {
		switch x := v.(type) {
		case *table:
			var ok bool
			if v, ok = x.get(part); !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, v != nil
}

func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *table:
		return "an object with " + summarize(x)
	}
	return fmt.Sprint(v)
}

func summarize(v any) string {
	switch x := v.(type) {
	case *table:
		keys := x.keys
		if len(keys) > 5 {
			return fmt.Sprintf("{ %s ... and %d more fields }", strings.Join(keys[:5], ", "), len(keys)-5)
		}
		return "{ " + strings.Join(keys, ", ") + " }"
	case []any:
		return fmt.Sprintf("[an array of %d items]", len(x))
	}
	return typeName(v)
}
