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

// list serves GET /sinks and GET /sources: every connector of the kind,
// by key.
func (s *Server) list(w http.ResponseWriter, _ *http.Request, kind connector.Kind) error {
	infos := s.rt.Connectors(kind)
	out := make([]connectorInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, s.info(i))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// running returns the connector the runtime has under key.
func (s *Server) running(kind connector.Kind, key string) (runtime.Info, error) {
	i, err := s.rt.Connector(kind, key)
	if err != nil {
		return i, runtimeError(kind, key, err)
	}
	return i, nil
}

// get serves GET /{kind}s/{key}: the info and the streams.
func (s *Server) get(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	i, err := s.running(kind, r.PathValue("key"))
	if err != nil {
		return err
	}
	d, err := s.details(i)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// getTransforms serves GET /{kind}s/{key}/transforms: the transforms of
// the running configuration in file order, enabled or not.
func (s *Server) getTransforms(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	i, err := s.running(kind, r.PathValue("key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.transforms(i.Config))
	return nil
}

// restart serves POST /{kind}s/{key}/restart: the connector stops
// (draining what is in flight), reloads its active configuration version
// and starts again if enabled; no other connector is touched. A key the
// runtime does not run yet but the provider has (a connector created
// through POST .../configs) is started. The configuration loaded passes
// the checks of POST .../configs first (admit). Restarts of one connector
// run one at a time; the restart goes on if the client goes away.
func (s *Server) restart(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	unlock := s.lockConnector(kind, key)
	defer unlock()
	// The configuration a restart loads passes the checks a new one
	// does: a file that appeared in config_dir is not run unchecked.
	p, err := s.provider()
	if err != nil {
		return err
	}
	c, err := p.Active(r.Context(), config.Kind(kind), key)
	if err != nil {
		if _, rerr := s.rt.Connector(kind, key); rerr != nil {
			if errors.Is(err, config.ErrNotFound) || errors.Is(err, config.ErrInvalid) {
				return connectorNotFound(kind, key)
			}
			return providerError(kind, key, nil, err)
		}
		// A connector the runtime has, whose configuration no longer
		// loads: Restart records the reason on it.
	} else if err := s.admit(kind, key, c); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.restartTimeout)
	defer cancel()
	if err := s.rt.Restart(ctx, kind, key); err != nil {
		var ae *APIError
		if errors.As(providerError(kind, key, nil, err), &ae) && ae.Status < 500 {
			return ae
		}
		return &APIError{Status: http.StatusInternalServerError, Code: codeError,
			Reason: fmt.Sprintf("restart %s %q: %v", kind, key, err), Err: err}
	}
	s.log.Info("connector restarted through the API", "connector_type", string(kind), "connector_key", key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// provider returns the runtime's configuration provider.
func (s *Server) provider() (config.Provider, error) {
	p := s.rt.Provider()
	if p == nil {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
			Reason: "the runtime has not started: no connector configuration provider yet"}
	}
	return p, nil
}
