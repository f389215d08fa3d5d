package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ferryhq/ferry/connector"
)

// routes registers every endpoint on a ServeMux.
func (s *Server) routes() (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Connector Runtime API"))
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	mux.Handle("GET /stats", s.handle(s.getStats))
	mux.Handle("GET /events", s.handle(s.getEvents))           // Ferry extension (api/events.go)
	mux.Handle("GET /asyncapi.yaml", s.handle(s.getAsyncAPI))  // Ferry extension (api/events.go)
	mux.Handle("GET /views/{name}/{key}", s.handle(s.getView)) // Ferry extension (api/views.go)
	s.routeConsole(mux)                                        // Ferry extension (api/console.go)
	mux.Handle("GET /streams", s.handle(s.getStreams))         // Ferry extension (api/streams.go)
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		base := "/" + string(kind) + "s"
		k := kind
		mux.Handle("GET "+base, s.handle(func(w http.ResponseWriter, r *http.Request) error { return s.list(w, r, k) }))
		for _, rt := range []struct {
			method, path string
			h            func(http.ResponseWriter, *http.Request, connector.Kind) error
		}{
			{"GET", "/{key}", s.get},
			{"GET", "/{key}/transforms", s.getTransforms},
			{"GET", "/{key}/activity", s.getActivity},                   // Ferry extension (api/activity.go)
			{"GET", "/{key}/dead_letters", s.getDeadLetters},            // Ferry extension (api/deadletters.go)
			{"POST", "/{key}/dead_letters/replay", s.replayDeadLetters}, // Ferry extension (api/deadletters.go)
			{"POST", "/{key}/restart", s.restart},
			{"DELETE", "/{key}", s.remove}, // Ferry extension
			{"GET", "/{key}/configs", s.listConfigs},
			{"POST", "/{key}/configs", s.createConfig},
			{"DELETE", "/{key}/configs", s.deleteConfig},
			{"GET", "/{key}/configs/{version}", s.getConfig},
			{"GET", "/{key}/configs/active", s.getActiveConfig},
			{"PUT", "/{key}/configs/active", s.setActiveConfig},
			{"GET", "/{key}/configs/plugin", s.getPluginConfig},
		} {
			h := rt.h
			mux.Handle(rt.method+" "+base+rt.path, s.handle(func(w http.ResponseWriter, r *http.Request) error { return h(w, r, k) }))
		}
	}
	if s.cfg.Metrics.Enabled {
		if err := s.routeMetrics(mux); err != nil {
			return nil, err
		}
	}
	return mux, nil
}

// routeMetrics serves the runtime's Prometheus metrics at [http.metrics]
// endpoint, exactly that path.
func (s *Server) routeMetrics(mux *http.ServeMux) (err error) {
	ep := s.metricsEndpoint()
	switch {
	case !strings.HasPrefix(ep, "/"):
		return fmt.Errorf("api: http.metrics.endpoint %q: expected a path starting with \"/\"", ep)
	case ep == "/":
		return fmt.Errorf(`api: http.metrics.endpoint "/": the root path is the API's own; use a path such as "/metrics"`)
	case strings.ContainsAny(ep, "{}?# \t\r\n"):
		return fmt.Errorf("api: http.metrics.endpoint %q: expected a plain path without braces, spaces, '?' or '#'", ep)
	}
	pattern := ep
	if strings.HasSuffix(pattern, "/") {
		pattern += "{$}" // the path itself, not everything under it
	}
	defer func() {
		// ServeMux panics on a pattern that conflicts with another one.
		if r := recover(); r != nil {
			err = fmt.Errorf("api: http.metrics.endpoint %q conflicts with an API path: %v", ep, r)
		}
	}()
	m := s.rt.Metrics()
	if m == nil {
		return fmt.Errorf("api: http.metrics.enabled: the runtime has no metrics")
	}
	mux.Handle("GET "+pattern, m.Handler())
	return nil
}

// metricsEndpoint is [http.metrics] endpoint, "/metrics" when empty.
func (s *Server) metricsEndpoint() string {
	if s.cfg.Metrics.Endpoint == "" {
		return "/metrics"
	}
	return s.cfg.Metrics.Endpoint
}
