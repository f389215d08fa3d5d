package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// APIError is an error with the HTTP status and the upstream error code it
// is answered with. Handlers return it; the server renders it once, as
// {"code": Code, "reason": Reason}.
type APIError struct {
	Status int
	Code   string
	Reason string
	// Err is the cause, for errors.Is and the log; it is not sent.
	Err error
}

func (e *APIError) Error() string {
	if e.Err != nil && e.Err.Error() != e.Reason {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Reason, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Reason)
}

func (e *APIError) Unwrap() error { return e.Err }

// errorBody is upstream's ErrorResponse.
type errorBody struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Error codes. The first ones are upstream's (RuntimeError::as_code);
// the Ferry ones name cases upstream has no code for.
const (
	codeError                = "error"
	codeInvalidConfig        = "invalid_configuration"
	codeInvalidKey           = "invalid_connector_key"
	codeUnauthorized         = "unauthorized"           // Ferry: upstream sends no body
	codeBadRequest           = "bad_request"            // Ferry: upstream's extractors answer in plain text
	codeActiveVersion        = "config_version_active"  // Ferry: upstream deletes the active version
	codeConfigVersionRunning = "config_version_running" // Ferry: the version the connector runs
	codePluginConfigMissing  = "plugin_config_not_found"
	codeUnavailable          = "runtime_unavailable"
)

func notFoundCode(kind connector.Kind) string { return string(kind) + "_not_found" }

func configNotFoundCode(kind connector.Kind) string { return string(kind) + "_config_not_found" }

func badRequest(field, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: codeBadRequest,
		Reason: field + ": " + fmt.Sprintf(format, args...)}
}

func connectorNotFound(kind connector.Kind, key string) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: notFoundCode(kind),
		Reason: fmt.Sprintf("%s not found with key: %s", kindTitle(kind), key)}
}

func versionNotFound(kind connector.Kind, key string, version uint64) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: configNotFoundCode(kind),
		Reason: fmt.Sprintf("%s config not found with key: %s, version: %d", kindTitle(kind), key, version)}
}

func kindTitle(kind connector.Kind) string {
	if kind == connector.KindSource {
		return "Source"
	}
	return "Sink"
}

// providerError turns an error of the configuration provider into an
// APIError. version is nil when the call was about the connector as a
// whole.
func providerError(kind connector.Kind, key string, version *uint64, err error) error {
	var ae *APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, config.ErrNotFound) && version != nil:
		e := versionNotFound(kind, key, *version)
		e.Err = err
		return e
	case errors.Is(err, config.ErrNotFound):
		e := connectorNotFound(kind, key)
		e.Err = err
		return e
	case errors.Is(err, config.ErrActiveVersion):
		return &APIError{Status: http.StatusConflict, Code: codeActiveVersion, Reason: err.Error(), Err: err}
	case errors.Is(err, config.ErrInvalid):
		return &APIError{Status: http.StatusBadRequest, Code: codeInvalidConfig, Reason: err.Error(), Err: err}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: codeError, Reason: err.Error(), Err: err}
}

// runtimeError turns an error of the runtime into an APIError.
func runtimeError(kind connector.Kind, key string, err error) error {
	if errors.Is(err, runtime.ErrNotFound) {
		e := connectorNotFound(kind, key)
		e.Err = err
		return e
	}
	return providerError(kind, key, nil, err)
}

// writeError renders err; anything but an *APIError is a 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *APIError
	if !errors.As(err, &ae) {
		ae = &APIError{Status: http.StatusInternalServerError, Code: codeError, Reason: err.Error(), Err: err}
	}
	if ae.Status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "error", ae)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "reason", ae.Reason)
	}
	writeJSON(w, ae.Status, errorBody{Code: ae.Code, Reason: ae.Reason})
}

// writeJSON sends v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(errorBody{Code: codeError, Reason: "encode response: " + err.Error()})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// handlerFunc is a handler that returns its error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}
