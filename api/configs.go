package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// runningVersion returns the version the runtime runs for a connector, and
// whether it runs one (a connector whose configuration failed to load,
// one created through the API and not started, or one stopped, has none).
func (s *Server) runningVersion(kind connector.Kind, key string) (uint64, bool) {
	i, err := s.rt.Connector(kind, key)
	if err != nil || i.Config == nil || i.Status == runtime.StatusStopped {
		return 0, false
	}
	return i.Version, true
}

// view is a version as the API shows it: active when the provider selects
// it (a restart runs it), running when the connector runs it now.
func (s *Server) view(kind connector.Kind, c *config.Connector, active bool) configVersion {
	n, runs := s.runningVersion(kind, c.Key)
	return configVersion{c: s.redacted(c), active: active, running: runs && n == c.Version}
}

// listConfigs serves GET /{kind}s/{key}/configs: every stored version,
// lowest first; "active" marks the version selected to run, "running" the
// one the connector runs now.
func (s *Server) listConfigs(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	p, err := s.provider()
	if err != nil {
		return err
	}
	versions, err := p.Versions(r.Context(), config.Kind(kind), key)
	if err != nil {
		if errors.Is(err, config.ErrInvalid) {
			return connectorNotFound(kind, key) // not a key any connector can have
		}
		return providerError(kind, key, nil, err)
	}
	out := make([]configVersion, 0, len(versions))
	for _, v := range versions {
		c, err := p.Get(r.Context(), config.Kind(kind), key, v.Version)
		if err != nil {
			return providerError(kind, key, &v.Version, err)
		}
		out = append(out, s.view(kind, c, v.Active))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getConfig serves GET /{kind}s/{key}/configs/{version}.
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	version, err := parseVersion("version (path)", r.PathValue("version"))
	if err != nil {
		return err
	}
	p, err := s.provider()
	if err != nil {
		return err
	}
	c, err := p.Get(r.Context(), config.Kind(kind), key, version)
	if err != nil {
		return s.versionError(r.Context(), p, kind, key, version, err)
	}
	a, err := p.Active(r.Context(), config.Kind(kind), key)
	writeJSON(w, http.StatusOK, s.view(kind, c, err == nil && a.Version == version))
	return nil
}

// versionError tells an unknown connector (404 <kind>_not_found) from an
// unknown version of a known one (404 <kind>_config_not_found).
func (s *Server) versionError(ctx context.Context, p config.Provider, kind connector.Kind, key string, version uint64, err error) error {
	if errors.Is(err, config.ErrInvalid) {
		return connectorNotFound(kind, key)
	}
	if !errors.Is(err, config.ErrNotFound) {
		return providerError(kind, key, &version, err)
	}
	if _, rerr := s.rt.Connector(kind, key); rerr != nil {
		if _, verr := p.Versions(ctx, config.Kind(kind), key); config.IsNotFound(verr) {
			return connectorNotFound(kind, key)
		}
	}
	return providerError(kind, key, &version, err)
}

// getActiveConfig serves GET /{kind}s/{key}/configs/active: the version
// selected to run, at once after PUT .../configs/active; "running" says
// whether the connector runs it already, and "restart_required" that it
// waits for POST .../restart. For a connector the provider no longer has,
// the configuration it runs.
func (s *Server) getActiveConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	p, err := s.provider()
	if err != nil {
		return err
	}
	c, err := p.Active(r.Context(), config.Kind(kind), key)
	if err != nil {
		if i, rerr := s.rt.Connector(kind, key); rerr == nil && i.Config != nil {
			writeJSON(w, http.StatusOK, s.view(kind, i.Config, true))
			return nil
		}
		if errors.Is(err, config.ErrInvalid) {
			return connectorNotFound(kind, key)
		}
		return providerError(kind, key, nil, err)
	}
	writeJSON(w, http.StatusOK, s.view(kind, c, true))
	return nil
}

// setActiveConfig serves PUT /{kind}s/{key}/configs/active with
// {"version": N}: the version the connector runs after its next restart.
// A version the runtime would refuse to run is not activated (admit).
func (s *Server) setActiveConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	version, err := decodeActiveVersion(body)
	if err != nil {
		return err
	}
	p, err := s.provider()
	if err != nil {
		return err
	}
	if c, err := p.Get(r.Context(), config.Kind(kind), key, version); err == nil {
		if err := s.admit(kind, key, c); err != nil {
			return err
		}
	}
	if err := p.SetActive(r.Context(), config.Kind(kind), key, version); err != nil {
		return s.versionError(r.Context(), p, kind, key, version, err)
	}
	s.log.Info("active configuration version set", "connector_type", string(kind), "connector_key", key, "version", version)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createConfig serves POST /{kind}s/{key}/configs: the body is upstream's
// CreateSinkConfig / CreateSourceConfig (a connector configuration without
// key and version; a key must match the path, a version is ignored). The
// answer is the stored version, numbered one above the highest. A
// configuration the runtime would refuse to run is not stored (admit).
func (s *Server) createConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	if !config.ValidKey(key) {
		return &APIError{Status: http.StatusBadRequest, Code: codeInvalidKey,
			Reason: fmt.Sprintf("invalid connector key %q: expected at most 128 bytes of ASCII letters, digits, '-', '_' or '.', starting with a letter or digit", key)}
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	c, err := config.DecodeConnectorJSON("request body", config.Kind(kind), key, withoutAnswerKeys(body), config.WithEnv(config.MapEnv(nil)))
	if err != nil {
		return &APIError{Status: http.StatusBadRequest, Code: codeInvalidConfig, Reason: err.Error(), Err: err}
	}
	p, err := s.provider()
	if err != nil {
		return err
	}
	// Answers hide secrets; a configuration read, edited and sent back
	// gets them again from the version it came from.
	if old, err := p.Active(r.Context(), config.Kind(kind), key); err == nil {
		config.UnredactBy(c, old, s.pluginSecrets(c))
	}
	if err := s.admit(kind, key, c); err != nil {
		return err
	}
	saved, err := p.Create(r.Context(), c)
	if err != nil {
		return providerError(kind, key, nil, err)
	}
	s.log.Info("configuration version created", "connector_type", string(kind), "connector_key", key, "version", saved.Version)
	writeJSON(w, http.StatusOK, s.view(kind, saved, false))
	return nil
}

// deleteConfig serves DELETE /{kind}s/{key}/configs?version=N. Neither the
// active version nor the running one can be deleted (409): activate
// another one, and restart, first. Upstream
// deletes the active version when version is left out; Ferry requires it.
func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	q := r.URL.Query()
	if !q.Has("version") {
		return badRequest("version", "query parameter required, such as ?version=1 (the active version cannot be deleted)")
	}
	version, err := parseVersion("version", q.Get("version"))
	if err != nil {
		return err
	}
	p, err := s.provider()
	if err != nil {
		return err
	}
	a, aerr := p.Active(r.Context(), config.Kind(kind), key)
	if n, runs := s.runningVersion(kind, key); runs && n == version && (aerr != nil || a.Version != version) {
		return &APIError{Status: http.StatusConflict, Code: codeConfigVersionRunning,
			Reason: fmt.Sprintf("%s %q version %d is running: restart the connector (POST /%ss/%s/restart) so that it runs the active version, then delete this one",
				kind, key, version, kind, key)}
	}
	if err := p.Delete(r.Context(), config.Kind(kind), key, version); err != nil {
		return s.versionError(r.Context(), p, kind, key, version, err)
	}
	s.log.Info("configuration version deleted", "connector_type", string(kind), "connector_key", key, "version", version)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// answerKeys are what a configuration answer adds to a configuration;
// a client that sends an answer back as a new version need not remove
// them.
var answerKeys = []string{"active", "running", "restart_required"}

// withoutAnswerKeys removes answerKeys from a JSON object body.
func withoutAnswerKeys(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body // the decoder reports what is wrong
	}
	found := false
	for _, k := range answerKeys {
		if _, ok := m[k]; ok {
			delete(m, k)
			found = true
		}
	}
	if !found {
		return body
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

func parseVersion(field, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest(field, "expected a version number (a non-negative integer), got %q", s)
	}
	return v, nil
}

// readBody reads a request body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Code: codeBadRequest,
				Reason: fmt.Sprintf("request body: larger than %d bytes", maxBody)}
		}
		return nil, badRequest("request body", "%v", err)
	}
	return data, nil
}

// decodeActiveVersion reads {"version": N}; other fields are ignored, as
// upstream does.
func decodeActiveVersion(body []byte) (uint64, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return 0, badRequest("request body", "expected a JSON object such as {\"version\": 1}: %v", err)
	}
	if dec.More() {
		return 0, badRequest("request body", "expected one JSON object such as {\"version\": 1}, got more data after it")
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, badRequest("request body", "expected one JSON object such as {\"version\": 1}, got more data after it")
	}
	raw, ok := m["version"]
	if !ok || raw == nil {
		return 0, badRequest("version", "required, such as {\"version\": 1}")
	}
	n, ok := raw.(json.Number)
	if !ok {
		return 0, badRequest("version", "expected a non-negative integer, got %s", jsonType(raw))
	}
	v, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		return 0, badRequest("version", "expected a non-negative integer, got %s", n)
	}
	return v, nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
