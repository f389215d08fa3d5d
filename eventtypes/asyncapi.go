package eventtypes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ferryhq/ferry/config"
)

// Schema formats of AsyncAPI multi-format schemas.
const (
	avroSchemaFormat  = "application/vnd.apache.avro+json;version=1.9.0"
	protoSchemaFormat = "application/vnd.google.protobuf;version=3"
)

// DocInfo is the info object of an AsyncAPI document.
type DocInfo struct {
	Title       string // default "Ferry deployment"
	Version     string // default "1.0.0"
	Description string
}

type aDoc struct {
	AsyncAPI           string                `yaml:"asyncapi"`
	Info               aInfo                 `yaml:"info"`
	DefaultContentType string                `yaml:"defaultContentType"`
	Servers            map[string]aServer    `yaml:"servers,omitempty"`
	Channels           map[string]*aChannel  `yaml:"channels"`
	Operations         map[string]aOperation `yaml:"operations"`
	Components         aComponents           `yaml:"components"`
}

type aInfo struct {
	Title       string `yaml:"title"`
	Version     string `yaml:"version"`
	Description string `yaml:"description,omitempty"`
}

type aServer struct {
	Host        string `yaml:"host"`
	Protocol    string `yaml:"protocol"`
	Description string `yaml:"description,omitempty"`
}

type aRef struct {
	Ref string `yaml:"$ref"`
}

type aChannel struct {
	Address     string          `yaml:"address"`
	Title       string          `yaml:"title,omitempty"`
	Description string          `yaml:"description,omitempty"`
	Messages    map[string]aRef `yaml:"messages,omitempty"`
}

type aOperation struct {
	Action   string         `yaml:"action"`
	Channel  aRef           `yaml:"channel"`
	Title    string         `yaml:"title,omitempty"`
	Summary  string         `yaml:"summary,omitempty"`
	Messages []aRef         `yaml:"messages,omitempty"`
	Tags     []aTag         `yaml:"tags,omitempty"`
	Ferry    map[string]any `yaml:"x-ferry,omitempty"`
}

type aTag struct {
	Name string `yaml:"name"`
}

type aComponents struct {
	Schemas  map[string]any       `yaml:"schemas,omitempty"`
	Messages map[string]*aMessage `yaml:"messages,omitempty"`
}

type aMessage struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title,omitempty"`
	Summary     string `yaml:"summary,omitempty"`
	ContentType string `yaml:"contentType,omitempty"`
	Payload     any    `yaml:"payload,omitempty"`
	Ferry       any    `yaml:"x-ferry,omitempty"`
}

// AsyncAPI renders the catalog as an AsyncAPI 3.0.0 document in YAML;
// see the package documentation for the mapping.
func (c *Catalog) AsyncAPI(info DocInfo) ([]byte, error) {
	d := aDoc{AsyncAPI: "3.0.0", DefaultContentType: "application/json",
		Info:     aInfo{Title: info.Title, Version: info.Version, Description: info.Description},
		Channels: map[string]*aChannel{}, Operations: map[string]aOperation{},
		Components: aComponents{Schemas: map[string]any{}, Messages: map[string]*aMessage{}}}
	if d.Info.Title == "" {
		d.Info.Title = "Ferry deployment"
	}
	if d.Info.Version == "" {
		d.Info.Version = "1.0.0"
	}
	if c.Server != "" {
		d.Servers = map[string]aServer{"iggy": {Host: c.Server, Protocol: "iggy", Description: "The Iggy server (binary protocol over TCP)"}}
	}
	ids := newIDs()
	msgID := map[string]string{}
	for _, t := range c.Types {
		id := ids.get("message", t.Name)
		msgID[t.Name] = id
		m, err := c.message(t, id, d.Components.Schemas)
		if err != nil {
			return nil, fmt.Errorf("event type %q: %w", t.Name, err)
		}
		d.Components.Messages[id] = m
	}
	chanID := map[string]string{}
	channel := func(addr string) (string, *aChannel) {
		if id, ok := chanID[addr]; ok {
			return id, d.Channels[id]
		}
		id := ids.get("channel", strings.ReplaceAll(addr, "/", "."))
		chanID[addr] = id
		stream, topic, _ := strings.Cut(addr, "/")
		ch := &aChannel{Address: addr, Title: fmt.Sprintf("Topic %s of stream %s", topic, stream)}
		d.Channels[id] = ch
		return id, ch
	}
	addMessages := func(chID string, ch *aChannel, types []string) []aRef {
		var refs []aRef
		for _, name := range types {
			id := msgID[name]
			if ch.Messages == nil {
				ch.Messages = map[string]aRef{}
			}
			ch.Messages[id] = aRef{"#/components/messages/" + escapePtr(id)}
			refs = append(refs, aRef{"#/channels/" + escapePtr(chID) + "/messages/" + escapePtr(id)})
		}
		return refs
	}
	for _, t := range c.Types {
		for _, tp := range t.Topics {
			id, ch := channel(tp)
			addMessages(id, ch, []string{t.Name})
		}
	}
	for _, e := range c.Endpoints {
		id, ch := channel(e.Address())
		op := aOperation{Action: "receive", Channel: aRef{"#/channels/" + escapePtr(id)},
			Messages: addMessages(id, ch, e.Types), Tags: []aTag{{e.Kind}},
			Ferry: map[string]any{"kind": e.Kind, "connector": e.Key, "plugin": e.Plugin, "schema": e.Schema}}
		verb := "reads"
		if e.Kind == KindSource {
			op.Action, verb = "send", "sends to"
		}
		name := e.Key
		if e.Kind == KindHook {
			name = strings.TrimPrefix(e.Key, HookPrefix)
		}
		op.Title = fmt.Sprintf("%s %s %s %s", e.Kind, name, verb, e.Address())
		if e.Plugin != "" {
			op.Summary = fmt.Sprintf("The %s connector %q (%s).", e.Kind, e.Key, e.Plugin)
		}
		d.Operations[ids.get("operation", e.Key+"."+op.Action+"."+id)] = op
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode the AsyncAPI document: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode the AsyncAPI document: %w", err)
	}
	return buf.Bytes(), nil
}

// message is the message object of t; a JSON Schema goes to schemas
// under id.
func (c *Catalog) message(t *Type, id string, schemas map[string]any) (*aMessage, error) {
	m := &aMessage{Name: t.Name, Title: t.Name, Summary: t.Description, ContentType: "application/json"}
	ferry := map[string]any{"format": t.Format}
	if t.Version != "" {
		ferry["version"] = t.Version
	}
	if t.Origin != "" {
		ferry["declared_by"] = t.Origin
	}
	m.Ferry = ferry
	if len(t.Schema) == 0 {
		return m, nil
	}
	var doc any
	if err := json.Unmarshal(t.Schema, &doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	switch t.Format {
	case config.EventFormatJSONSchema:
		if obj, ok := doc.(map[string]any); ok {
			delete(obj, "$schema")
			delete(obj, "$id")
		}
		schemas[id] = rewriteRefs(doc, "#/components/schemas/"+escapePtr(id))
		m.Payload = aRef{"#/components/schemas/" + escapePtr(id)}
	case config.EventFormatAvro:
		m.Payload = map[string]any{"schemaFormat": avroSchemaFormat, "schema": doc}
		m.ContentType = "application/octet-stream"
	case config.EventFormatProto:
		m.Payload = map[string]any{"schemaFormat": protoSchemaFormat, "schema": doc}
		m.ContentType = "application/x-protobuf"
		if t.MessageType != "" {
			ferry["message_type"] = t.MessageType
		}
	}
	return m, nil
}

// rewriteRefs points the local $refs of a schema moved to base.
func rewriteRefs(v any, base string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(s, "#") {
				x[k] = base + strings.TrimPrefix(s, "#")
				continue
			}
			x[k] = rewriteRefs(e, base)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteRefs(e, base)
		}
	}
	return v
}

// escapePtr escapes a JSON pointer token.
func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// ids hands out AsyncAPI component keys (letters, digits, '.', '-', '_'),
// unique per namespace.
type ids map[string]map[string]bool

func newIDs() ids { return ids{} }

func (s ids) get(ns, want string) string {
	base := idUnsafe.ReplaceAllString(want, "_")
	if s[ns] == nil {
		s[ns] = map[string]bool{}
	}
	id := base
	for n := 2; s[ns][id]; n++ {
		id = fmt.Sprintf("%s_%d", base, n)
	}
	s[ns][id] = true
	return id
}

// sortedKeys is for tests and stable listings.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
