package api

import (
	"net/http"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/eventtypes"
)

// GET /events and GET /asyncapi.yaml (Ferry extensions): the catalog of
// declared event types and the AsyncAPI 3.0 document of the deployment,
// built from the runtime's config.toml ([events]), the active
// configuration of every connector loaded and the event types their
// specs declare (package eventtypes). Both
// need the API's credential, as every path but /, /health and the
// public reads do.

// eventsBody is GET /events: the catalog (eventtypes.Catalog's JSON,
// which eventtypes.ParseCatalog reads back for `ferry events check
// --against`), the problems that left parts of it out, and the checks.
type eventsBody struct {
	*eventtypes.Catalog
	Errors   []string             `json:"errors"`
	Findings []eventtypes.Finding `json:"findings"`
}

// catalog builds the deployment's catalog; err lists what was left out.
func (s *Server) catalog() (*eventtypes.Catalog, error) {
	var conns []*config.Connector
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, i := range s.rt.Connectors(kind) {
			if i.Config != nil {
				conns = append(conns, i.Config)
			}
		}
	}
	reg := s.rt.Registry()
	if reg == nil {
		reg = connector.Default
	}
	// With the registry, the event types the connectors' specs declare
	// (a plugin's manifest [[events]]) join config.toml's.
	return eventtypes.Build(s.rt.Config(), conns, eventtypes.WithRegistry(reg))
}

// getEvents serves GET /events.
func (s *Server) getEvents(w http.ResponseWriter, _ *http.Request) error {
	cat, err := s.catalog()
	body := eventsBody{Catalog: cat, Errors: errorLines(err), Findings: cat.Check()}
	if body.Findings == nil {
		body.Findings = []eventtypes.Finding{}
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// getAsyncAPI serves GET /asyncapi.yaml. Parts of the configuration that
// do not build (see GET /events' errors) are left out of the document.
func (s *Server) getAsyncAPI(w http.ResponseWriter, _ *http.Request) error {
	cat, _ := s.catalog()
	doc, err := cat.AsyncAPI(eventtypes.DocInfo{Version: s.opts.version,
		Description: "The topics, event types, sources, sinks and hooks of this Ferry connector runtime."})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
	return nil
}

// errorLines is err as one line per problem ([] for nil).
func errorLines(err error) []string {
	out := []string{}
	if err == nil {
		return out
	}
	if es, ok := err.(config.Errors); ok {
		for _, e := range es {
			out = append(out, e.Error())
		}
		return out
	}
	return append(out, err.Error())
}
