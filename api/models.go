package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// connectorInfo is upstream's SinkInfoResponse / SourceInfoResponse.
type connectorInfo struct {
	ID                 uint32          `json:"id"`
	Key                string          `json:"key"`
	Name               string          `json:"name"`
	Path               string          `json:"path"`
	Enabled            bool            `json:"enabled"`
	Status             string          `json:"status"`
	LastError          *connectorError `json:"last_error,omitempty"`
	PluginConfigFormat string          `json:"plugin_config_format,omitempty"`
}

// connectorError is upstream's ConnectorError; Timestamp is in
// microseconds since the Unix epoch (IggyTimestamp).
type connectorError struct {
	Message   string `json:"message"`
	Timestamp uint64 `json:"timestamp"`
}

// connectorDetails is upstream's SinkDetailsResponse / SourceDetailsResponse:
// the info and the streams of the running configuration.
type connectorDetails struct {
	connectorInfo
	Streams json.RawMessage `json:"streams"`
}

// transformInfo is upstream's TransformResponse.
type transformInfo struct {
	Type   string         `json:"type"`
	Config map[string]any `json:"config"`
}

// status is the ConnectorStatus upstream sends: lower case.
func status(s runtime.Status) string { return strings.ToLower(string(s)) }

func (s *Server) info(i runtime.Info) connectorInfo {
	out := connectorInfo{ID: s.id(i.Kind, i.Key), Key: i.Key, Name: i.Name, Path: i.Path,
		Enabled: i.Enabled, Status: status(i.Status)}
	if i.LastError != "" {
		out.LastError = &connectorError{Message: config.RedactText(i.LastError), Timestamp: micros(i.LastErrorAt)}
	}
	if i.Config != nil {
		out.PluginConfigFormat = string(i.Config.PluginConfigFormat)
	}
	return out
}

func (s *Server) details(i runtime.Info) (connectorDetails, error) {
	d := connectorDetails{connectorInfo: s.info(i), Streams: json.RawMessage("[]")}
	if i.Config == nil {
		return d, nil
	}
	streams, err := field(s.redacted(i.Config), "streams")
	if err != nil {
		return d, err
	}
	d.Streams = streams
	return d, nil
}

// transforms lists c's transforms for an answer, secrets redacted.
func (s *Server) transforms(c *config.Connector) []transformInfo {
	out := []transformInfo{}
	if c == nil {
		return out
	}
	for _, t := range s.redacted(c).Transforms {
		cfg := t.Config
		if cfg == nil {
			cfg = map[string]any{"enabled": t.Enabled}
		}
		out = append(out, transformInfo{Type: t.Name, Config: cfg})
	}
	return out
}

// redacted is c for an answer: the plugin_config fields its connector's
// spec marks secret are redacted, or, for a connector that declares no
// spec, the keys that look secret.
func (s *Server) redacted(c *config.Connector) *config.Connector {
	return c.RedactedBy(s.pluginSecrets(c))
}

// pluginSecrets says which plugin_config keys of c are secret, by the
// spec of its connector in the runtime's registry; nil when there is none.
func (s *Server) pluginSecrets(c *config.Connector) func(key string) bool {
	reg := s.rt.Registry()
	if reg == nil {
		reg = connector.Default
	}
	dir := ""
	if c.File != "" {
		dir = filepath.Dir(c.File)
	}
	// Resolve, not Lookup: a plugin's spec (its manifest's, or its Spec
	// call's, cached) marks its secrets too.
	if info, ok, err := reg.Resolve(connector.Kind(c.Type), c.Path, dir); err == nil && ok && info.Spec != nil {
		return info.Spec.Secret
	}
	return nil
}

// field returns one field of a connector in upstream's JSON shape; the
// caller redacts c first.
func field(c *config.Connector, name string) (json.RawMessage, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", c.Type, c.Key, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", c.Type, c.Key, err)
	}
	v, ok := m[name]
	if !ok {
		return json.RawMessage("null"), nil
	}
	return v, nil
}

// configVersion is upstream's SinkConfigResponse / SourceConfigResponse:
// the configuration (SinkConfig / SourceConfig) with "active" added, its
// secrets redacted (config.Connector.Redacted; upstream sends them).
// "active" is the version selected to run (the one PUT .../configs/active
// chose, which a restart runs); Ferry adds "running", true for the
// version the connector runs now, and, on the active version while
// another one runs, "restart_required".
type configVersion struct {
	c       *config.Connector // redacted (Server.redacted)
	active  bool
	running bool
}

func (v configVersion) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(v.c)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimRight(data, " \n")
	if len(data) < 2 || data[len(data)-1] != '}' {
		return nil, fmt.Errorf("encode %s %q: not a JSON object", v.c.Type, v.c.Key)
	}
	sep := ","
	if bytes.Equal(data, []byte("{}")) {
		sep = ""
	}
	data = fmt.Appendf(data[:len(data)-1:len(data)-1], `%s"active":%t,"running":%t`, sep, v.active, v.running)
	if v.active && !v.running {
		data = append(data, `,"restart_required":true`...)
	}
	return append(data, '}'), nil
}
