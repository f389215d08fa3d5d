package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// codeNotSupported answers a request the configuration provider cannot
// carry out (Ferry).
const codeNotSupported = "not_supported"

// remove serves DELETE /{kind}s/{key} (Ferry extension; upstream has no
// way to remove a connector): the connector stops, draining what is in
// flight, the runtime forgets it, and every configuration version of it
// is deleted with its active-version entry, so it does not come back when
// the runtime restarts. 204 when done; 404 when neither the runtime nor
// the provider knows the key; 501 when the provider cannot delete a
// connector (config_type = "http"). Requests for one connector run one at
// a time, with restarts.
func (s *Server) remove(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	p, err := s.provider()
	if err != nil {
		return err
	}
	deleter, ok := p.(config.ConnectorDeleter)
	if !ok {
		return &APIError{Status: http.StatusNotImplemented, Code: codeNotSupported,
			Reason: fmt.Sprintf("the connectors provider (%T) cannot delete a connector; delete it where its configuration lives", p)}
	}
	unlock := s.lockConnector(kind, key)
	defer unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.restartTimeout)
	defer cancel()
	_, err = s.rt.Connector(kind, key)
	known := err == nil
	if known {
		if err := s.rt.Remove(ctx, kind, key); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return &APIError{Status: http.StatusInternalServerError, Code: codeError,
				Reason: fmt.Sprintf("stop %s %q: %v", kind, key, err), Err: err}
		}
	}
	if err := deleter.DeleteConnector(ctx, config.Kind(kind), key); err != nil {
		if !errors.Is(err, config.ErrNotFound) && !errors.Is(err, config.ErrInvalid) {
			return providerError(kind, key, nil, err)
		}
		if !known {
			return connectorNotFound(kind, key)
		}
	}
	s.log.Info("connector removed through the API", "connector_type", string(kind), "connector_key", key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
