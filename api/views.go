package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// viewBody is GET /views/{name}/{key}: the current value of a key in a
// running derive sink's state.
type viewBody struct {
	View  string          `json:"view"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// viewPrefix is the key prefix of the derive sinks ferry derive manages:
// the view NAME is the sink "derive-NAME", else the sink NAME itself.
const viewPrefix = "derive-"

// getView serves GET /views/{name}/{key} (Ferry extension).
func (s *Server) getView(w http.ResponseWriter, r *http.Request) error {
	name, key := r.PathValue("name"), r.PathValue("key")
	sink := viewPrefix + name
	v, err := s.rt.View(sink, key)
	if errors.Is(err, runtime.ErrNotFound) {
		sink = name
		v, err = s.rt.View(sink, key)
	}
	switch {
	case errors.Is(err, runtime.ErrNoKey):
		return &APIError{Status: http.StatusNotFound, Code: codeNoKey, Reason: err.Error(), Err: err}
	case errors.Is(err, runtime.ErrNoView):
		return &APIError{Status: http.StatusNotFound, Code: codeNoView, Reason: err.Error(), Err: err}
	case err != nil:
		return runtimeError(connector.KindSink, name, err)
	}
	writeJSON(w, http.StatusOK, viewBody{View: name, Key: key, Value: v})
	return nil
}

// Codes of GET /views answers.
const (
	codeNoView = "no_view"
	codeNoKey  = "no_key"
)
