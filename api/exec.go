package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ferryhq/ferry/connector"
)

// codeAPIKeyRequired answers a request the API serves only to a runtime
// with an API key (Ferry).
const codeAPIKeyRequired = "api_key_required"

// execNames resolves a connector path as the runtime's registry does
// (library names, dashes, "_sink" suffixes), knowing the exec sink only.
var execNames = func() *connector.Registry {
	r := connector.NewRegistry()
	err := r.Register(connector.Info{Kind: connector.KindSink, Name: "exec",
		NewSink: func(connector.Config) (connector.Sink, error) { return nil, errors.New("api: lookup only") }})
	if err != nil {
		panic(err)
	}
	return r
}()

// namesExec reports whether a sink path names the exec sink, which runs
// shell commands: by its name, or by an alias it was registered with.
func namesExec(path string) bool {
	if _, ok := execNames.Lookup(connector.KindSink, path); ok {
		return true
	}
	info, ok := connector.Default.Lookup(connector.KindSink, path)
	return ok && info.Name == "exec"
}

// checkExecAllowed refuses to create or activate an exec sink through the
// API when no api_key is configured: without a key, anyone who reaches
// the API could run commands as the runtime's user.
func (s *Server) checkExecAllowed(kind connector.Kind, key, path string) error {
	if kind != connector.KindSink || s.cfg.APIKey != "" || !namesExec(path) {
		return nil
	}
	return &APIError{Status: http.StatusForbidden, Code: codeAPIKeyRequired, Reason: fmt.Sprintf(
		"sink %q: path %q is the exec sink, which runs shell commands, so the API creates and activates exec sinks (hooks) only "+
			"when the runtime has an API key: set [http] api_key in config.toml (or the IGGY_CONNECTORS_HTTP_API_KEY environment variable), "+
			"restart the runtime, and send the key in the %s header (ferry hook: --api-key or $FERRY_API_KEY)", key, path, APIKeyHeader)}
}
