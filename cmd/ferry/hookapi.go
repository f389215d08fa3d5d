package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/internal/apitoken"
	"github.com/spf13/cobra"
)

// DefaultAPI is the runtime API's default address ([http] address).
const DefaultAPI = "http://127.0.0.1:8081"

// apiClient talks to a running runtime's management API.
type apiClient struct {
	url, key string
	keyFrom  string // where key came from, for error messages
	http     *http.Client
}

// apiFlags are the flags every command that uses the runtime API shares.
type apiFlags struct {
	url, key, config string
	json             bool
}

func (f *apiFlags) register(cmd *cobra.Command) {
	p := cmd.PersistentFlags()
	p.StringVar(&f.url, "api", "", "the runtime's management API (default $FERRY_API_URL, else [http] address of --config, else "+DefaultAPI+")")
	// The key's default is read in client, not shown: cobra prints flag
	// defaults in --help.
	p.StringVar(&f.key, "api-key", "", "the API key (default $FERRY_API_KEY, else [http] api_key of --config, else the runtime's local token)")
	p.StringVar(&f.config, "config", "", "the runtime's config.toml, to read its API address and key from (default $"+config.EnvConfigPath+" when set)")
	p.BoolVar(&f.json, "json", false, "print JSON for scripts")
}

// client finds the API and its credential: --api / $FERRY_API_URL, else
// the [http] address of the runtime's config.toml (--config or
// $IGGY_CONNECTORS_CONFIG_PATH), else the default address; --api-key /
// $FERRY_API_KEY, else the config's api_key, else the local token that a
// runtime without api_key wrote for that address (readable only by the
// user who runs it: internal/apitoken).
func (f *apiFlags) client() (*apiClient, error) {
	var rc *config.Runtime
	if file := config.ConfigPath(f.config, config.OSEnv()); file != "" {
		var err error
		if rc, err = config.Load(file); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
	}
	def := DefaultAPI
	if rc != nil && rc.HTTP.Address != "" {
		scheme := "http://"
		if rc.HTTP.TLS.Enabled {
			scheme = "https://"
		}
		def = scheme + rc.HTTP.Address
	}
	u := strings.TrimRight(strings.TrimSpace(orEnv(f.url, "FERRY_API_URL", def)), "/")
	if u == "" {
		return nil, usageError{errors.New("--api is empty; want a URL such as " + DefaultAPI)}
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, usageError{fmt.Errorf("--api %q: want an http:// or https:// URL", f.url)}
	}
	c := &apiClient{url: u, http: &http.Client{Timeout: 90 * time.Second}}
	switch {
	case f.key != "":
		c.key, c.keyFrom = f.key, "--api-key"
	case os.Getenv("FERRY_API_KEY") != "":
		c.key, c.keyFrom = os.Getenv("FERRY_API_KEY"), "$FERRY_API_KEY"
	case rc != nil && rc.HTTP.APIKey != "":
		c.key, c.keyFrom = rc.HTTP.APIKey, "[http] api_key of "+rc.File
	default:
		c.key, c.keyFrom = localToken(parsed)
	}
	return c, nil
}

// localToken reads the token a runtime without api_key wrote for the
// API at u; "" and why when there is none.
func localToken(u *url.URL) (token, from string) {
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	dir, err := apitoken.Dir()
	if err != nil {
		return "", err.Error()
	}
	tok, err := apitoken.Read(dir, host)
	if err != nil {
		return "", err.Error()
	}
	return tok, "the local token in " + filepath.Join(dir, apitoken.FileName(host))
}

// apiError is an error answer of the API: upstream's {"code", "reason"}.
type apiError struct {
	Status int
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func (e *apiError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("the runtime API answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Reason
}

// call sends a request with an optional JSON body and decodes a JSON
// answer into out (when not nil). Non-2xx answers are *apiError.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return fmt.Errorf("runtime API %s: %w", c.url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("api-key", c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the runtime API at %s (is `ferry run` running with [http] enabled?): %w", c.url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("runtime API %s %s: read answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		e := &apiError{Status: res.StatusCode}
		_ = json.Unmarshal(data, e)
		if res.StatusCode == http.StatusUnauthorized {
			if c.key == "" {
				e.Reason = "the runtime API at " + c.url + " refused the request: no credential was sent (" + c.keyFrom + "). " +
					"A runtime without [http] api_key accepts only its local token, which only the user running it can read: " +
					"run this command as that user, or set [http] api_key and pass it with --api-key or $FERRY_API_KEY"
			} else {
				e.Reason = "the runtime API at " + c.url + " refused the key from " + c.keyFrom +
					": pass the runtime's key with --api-key or $FERRY_API_KEY, or its config.toml with --config"
			}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("runtime API %s %s: unexpected answer: %w", method, path, err)
	}
	return nil
}

// isNotFound reports a 404 answer.
func isNotFound(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// sinkConfig is a connector configuration as the API shows it (upstream's
// SinkConfig), the fields hooks use.
type sinkConfig struct {
	Key          string         `json:"key"`
	Enabled      bool           `json:"enabled"`
	Version      uint64         `json:"version"`
	Name         string         `json:"name"`
	Path         string         `json:"path"`
	Streams      []sinkStream   `json:"streams"`
	PluginConfig map[string]any `json:"plugin_config"`
}

type sinkStream struct {
	Stream           string   `json:"stream"`
	Topics           []string `json:"topics"`
	Schema           string   `json:"schema,omitempty"`
	BatchLength      uint32   `json:"batch_length,omitempty"`
	PollInterval     string   `json:"poll_interval,omitempty"`
	ConsumerGroup    string   `json:"consumer_group,omitempty"`
	MaxRetries       *uint32  `json:"max_retries,omitempty"`
	OnError          string   `json:"on_error,omitempty"`
	DeadLetterStream string   `json:"dead_letter_stream,omitempty"`
	DeadLetterTopic  string   `json:"dead_letter_topic,omitempty"`
	Ordering         string   `json:"ordering,omitempty"`
	Concurrency      int      `json:"ordering_concurrency,omitempty"`
	StartFrom        string   `json:"start_from,omitempty"`
}

// sinkInfo is GET /sinks and /sinks/{key} (upstream's SinkInfoResponse).
type sinkInfo struct {
	Key       string `json:"key"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	Enabled   bool   `json:"enabled"`
	Status    string `json:"status"`
	LastError *struct {
		Message string `json:"message"`
	} `json:"last_error"`
}

// managed names a connector the CLI manages through the runtime API: a
// hook, a derived topic or a webhook source.
type managed struct {
	kind string // "sinks" or "sources", as in the API's paths
	key  string // the connector's key
	what string // "hook NAME", for messages
	del  string // the command that deletes it, for messages
}

// createManaged stores body as the connector's only configuration
// version, makes it active and starts it, then waits (up to 10s) for it
// to leave "starting", reading it with get (V's status and last error
// from status). When it does not start, the configuration is deleted
// again, so a corrected create can follow.
func createManaged[V any](ctx context.Context, c *apiClient, m managed, body any,
	get func() (*V, error), status func(*V) (state, lastErr string)) (*V, error) {
	base := "/" + m.kind + "/" + url.PathEscape(m.key)
	err := c.call(ctx, "GET", base+"/configs", nil, &[]json.RawMessage{})
	if err == nil {
		return nil, fmt.Errorf("%s already exists; delete it first (%s)", m.what, m.del)
	}
	if !isNotFound(err) {
		return nil, err
	}
	var saved struct {
		Version uint64 `json:"version"`
	}
	if err := c.call(ctx, "POST", base+"/configs", body, &saved); err != nil {
		return nil, fmt.Errorf("create %s: %w", m.what, err)
	}
	fail := func(err error) (*V, error) {
		if derr := c.call(context.WithoutCancel(ctx), "DELETE", base, nil, nil); derr != nil && !isNotFound(derr) {
			return nil, fmt.Errorf("%s did not start: %w; removing its configuration failed too (%s): %v", m.what, err, m.del, derr)
		}
		return nil, fmt.Errorf("%s was not created: it did not start: %w", m.what, err)
	}
	if err := c.call(ctx, "PUT", base+"/configs/active", map[string]uint64{"version": saved.Version}, nil); err != nil {
		return fail(err)
	}
	if err := c.call(ctx, "POST", base+"/restart", nil, nil); err != nil {
		return fail(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := get()
		if err != nil {
			return fail(err)
		}
		state, lastErr := status(v)
		switch {
		case state == "error":
			return fail(errors.New(lastErr))
		case state != "starting" || time.Now().After(deadline):
			return v, nil
		}
	}
}

// listManaged reads the connectors of kind ("sinks" or "sources") that
// is says are managed ones (a hook, a derived topic, a webhook source),
// sorted by name (the key without prefix), each with get.
func listManaged[V any](ctx context.Context, c *apiClient, kind, prefix string, is func(key, path string) bool,
	get func(name string) (*V, error)) ([]*V, error) {
	var infos []sinkInfo
	if err := c.call(ctx, "GET", "/"+kind, nil, &infos); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range infos {
		if is(s.Key, s.Path) {
			names = append(names, strings.TrimPrefix(s.Key, prefix))
		}
	}
	sort.Strings(names)
	out := []*V{}
	for _, name := range names {
		v, err := get(name)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
