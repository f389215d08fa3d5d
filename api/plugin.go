package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"go.yaml.in/yaml/v3"
)

// Content types of the plugin_config renderings (upstream's).
var pluginContentTypes = map[config.ConfigFormat]string{
	config.FormatJSON: "application/json",
	config.FormatYAML: "application/yaml",
	config.FormatTOML: "application/toml",
	config.FormatText: "text/plain",
}

// getPluginConfig serves GET /{kind}s/{key}/configs/plugin?format=...:
// the running configuration's plugin_config rendered as json, yaml, toml
// or text (JSON sent as text/plain). The format defaults to the
// connector's plugin_config_format, else toml, as upstream. Secrets are
// redacted (upstream sends them as configured).
func (s *Server) getPluginConfig(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	i, err := s.running(kind, key)
	if err != nil {
		return err
	}
	var format config.ConfigFormat
	if q := r.URL.Query(); q.Has("format") {
		format = config.ConfigFormat(strings.ToLower(q.Get("format")))
		if _, ok := pluginContentTypes[format]; !ok {
			return badRequest("format", "expected one of json, yaml, toml, text; got %q", q.Get("format"))
		}
	}
	if i.Config == nil || i.Config.PluginConfig == nil {
		return &APIError{Status: http.StatusNotFound, Code: codePluginConfigMissing,
			Reason: fmt.Sprintf("%s %q has no plugin_config", kind, key)}
	}
	if format == "" {
		format = i.Config.PluginConfigFormat
	}
	if format == "" {
		format = config.FormatTOML
	}
	body, err := renderPluginConfig(s.redacted(i.Config).PluginConfig, format)
	if err != nil {
		return &APIError{Status: http.StatusBadRequest, Code: codeError,
			Reason: fmt.Sprintf("cannot convert the plugin_config of %s %q to %s: %v", kind, key, format, err), Err: err}
	}
	w.Header().Set("Content-Type", pluginContentTypes[format])
	_, _ = w.Write(body)
	return nil
}

// renderPluginConfig renders a plugin_config in a format.
func renderPluginConfig(pc map[string]any, format config.ConfigFormat) ([]byte, error) {
	switch format {
	case config.FormatJSON, config.FormatText:
		return json.Marshal(pc)
	case config.FormatYAML:
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(pc); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case config.FormatTOML:
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(pc); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown format %q", format)
}
