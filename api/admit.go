package api

import (
	"fmt"
	"net/http"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

// admit refuses a configuration the runtime would not run (an unknown
// connector path, transforms or schemas that do not build, plugin_config
// the connector rejects, files it may not touch): 400
// invalid_configuration with the reason. Creating, activating and
// restarting all pass through it, so no path loads what create refuses.
func (s *Server) admit(kind connector.Kind, key string, c *config.Connector) error {
	if err := s.rt.Admit(c); err != nil {
		return &APIError{Status: http.StatusBadRequest, Code: codeInvalidConfig,
			Reason: fmt.Sprintf("%s %q: %v", kind, key, err), Err: err}
	}
	return nil
}
