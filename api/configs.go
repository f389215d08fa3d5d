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
// whether it runs one (a connector whose configuration failed to load, or
// one created through the API and not started, has none).
func (s *Server) runningVersion(kind connector.Kind, key string) (runtime.Info, bool) {
	i, err := s.rt.Connector(kind, key)
	if err != nil || i.Config == nil {
		return i, false
	}
	return i, true
}

// listConfigs serves GET /{kind}s/{key}/configs: every stored version,
// lowest first, each with "active" true for the version the connector
// runs (upstream's meaning); for a connector that runs none, the version
// the provider has selected.
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
	info, runs := s.runningVersion(kind, key)
	out := make([]configVersion, 0, len(versions))
	for _, v := range versions {
		c, err := p.Get(r.Context(), config.Kind(kind), key, v.Version)
		if err != nil {
			return providerError(kind, key, &v.Version, err)
		}
		active := v.Active
		if runs {
			active = v.Version == info.Version
		}
		out = append(out, configVersion{c: c, active: active})
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
	active := false
	if info, runs := s.runningVersion(kind, key); runs {
		active = info.Version == version
	} else if a, err := p.Active(r.Context(), config.Kind(kind), key); err == nil {
		active = a.Version == version
	}
	writeJSON(w, http.StatusOK, configVersion{c: c, active: active})
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

// getActiveConfig serves GET /{kind}s/{key}/configs/active: the
// configuration the connector runs (upstream's meaning), or, for a
// connector that runs none, the version the provider has selected.
func (s *Server) getActiveConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	if info, runs := s.runningVersion(kind, key); runs {
		writeJSON(w, http.StatusOK, configVersion{c: info.Config, active: true})
		return nil
	}
	p, err := s.provider()
	if err != nil {
		return err
	}
	c, err := p.Active(r.Context(), config.Kind(kind), key)
	if err != nil {
		if errors.Is(err, config.ErrInvalid) {
			return connectorNotFound(kind, key)
		}
		return providerError(kind, key, nil, err)
	}
	writeJSON(w, http.StatusOK, configVersion{c: c, active: true})
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
	c, err := config.DecodeConnectorJSON("request body", config.Kind(kind), key, body, config.WithEnv(config.MapEnv(nil)))
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
		config.Unredact(c, old)
	}
	if err := s.admit(kind, key, c); err != nil {
		return err
	}
	saved, err := p.Create(r.Context(), c)
	if err != nil {
		return providerError(kind, key, nil, err)
	}
	s.log.Info("configuration version created", "connector_type", string(kind), "connector_key", key, "version", saved.Version)
	writeJSON(w, http.StatusOK, configVersion{c: saved, active: false})
	return nil
}

// deleteConfig serves DELETE /{kind}s/{key}/configs?version=N. The active
// version cannot be deleted (409): activate another one first. Upstream
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
	if err := p.Delete(r.Context(), config.Kind(kind), key, version); err != nil {
		return s.versionError(r.Context(), p, kind, key, version, err)
	}
	s.log.Info("configuration version deleted", "connector_type", string(kind), "connector_key", key, "version", version)
	w.WriteHeader(http.StatusNoContent)
	return nil
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
