package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// DefaultAPI is the runtime API's default address ([http] address).
const DefaultAPI = "http://127.0.0.1:8081"

// apiClient talks to a running runtime's management API.
type apiClient struct {
	url, key string
	http     *http.Client
}

// apiFlags are the flags every command that uses the runtime API shares.
type apiFlags struct {
	url, key string
	json     bool
}

func (f *apiFlags) register(cmd *cobra.Command) {
	p := cmd.PersistentFlags()
	p.StringVar(&f.url, "api", "", "the runtime's management API (default $FERRY_API_URL, else "+DefaultAPI+")")
	// The key's default is read in client, not shown: cobra prints flag
	// defaults in --help.
	p.StringVar(&f.key, "api-key", "", "the API key, when [http] api_key is set (default $FERRY_API_KEY)")
	p.BoolVar(&f.json, "json", false, "print JSON for scripts")
}

func (f *apiFlags) client() (*apiClient, error) {
	u := strings.TrimRight(strings.TrimSpace(orEnv(f.url, "FERRY_API_URL", DefaultAPI)), "/")
	if u == "" {
		return nil, usageError{errors.New("--api is empty; want a URL such as " + DefaultAPI)}
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, usageError{fmt.Errorf("--api %q: want an http:// or https:// URL", f.url)}
	}
	return &apiClient{url: u, key: orEnv(f.key, "FERRY_API_KEY", ""), http: &http.Client{Timeout: 90 * time.Second}}, nil
}

// codeAPIKeyRequired is the API's answer to creating an exec sink (a hook)
// on a runtime without an API key.
const codeAPIKeyRequired = "api_key_required"

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
		switch {
		case res.StatusCode == http.StatusUnauthorized:
			e.Reason = strings.TrimSpace("the runtime API refused the request: " + e.Reason +
				" (pass its key with --api-key or $FERRY_API_KEY)")
		case res.StatusCode == http.StatusForbidden && e.Code == codeAPIKeyRequired:
			e.Reason = "the runtime at " + c.url + " has no API key, and it creates hooks (exec sinks, which run commands) only with one: " +
				"start it with [http] api_key set (for example IGGY_CONNECTORS_HTTP_API_KEY=<key> ferry run ...) " +
				"and pass the same key with --api-key or $FERRY_API_KEY"
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
