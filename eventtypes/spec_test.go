package eventtypes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

// specDeployment is a config.toml declaring "order.created" and three
// connectors: a source whose spec declares "tick" and "order.created"
// (which config.toml's entry overrides), a sink consuming "tick" by its
// consumes key, and a second source whose spec declares "tick" again.
func specDeployment(t *testing.T, otherTick string) (*config.Runtime, []*config.Connector, map[string]*connector.Spec) {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "config.toml"), "[connectors]\nconfig_dir = \"c\"\n[events.\"order.created\"]\nschema = '{\"type\": \"object\"}'\n")
	rt, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	tick := `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`
	specs := map[string]*connector.Spec{
		"gen": connector.NewSpec().DeclareEvents(
			connector.EventType{Name: "tick", Version: "1.0.0", Schema: tick, Topics: []string{"ticks"}},
			connector.EventType{Name: "order.created", Schema: `{"type":"array"}`}),
		"gen2": connector.NewSpec().DeclareEvents(connector.EventType{Name: "tick", Schema: otherTick}),
	}
	conns := []*config.Connector{
		{Type: config.KindSource, Key: "a-gen", Path: "gen", Enabled: true, Producers: []config.ProducerStream{
			{Stream: "app", Topic: "ticks"}, {Stream: "app", Topic: "orders"}}},
		{Type: config.KindSource, Key: "b-gen", Path: "gen2", Enabled: true, Producers: []config.ProducerStream{{Stream: "app", Topic: "more"}}},
		{Type: config.KindSink, Key: "out", Path: "none", Enabled: true, Consumers: []config.ConsumerStream{
			{Stream: "app", Topics: []string{"ticks"}, ConsumedEvents: config.ConsumedEvents{Consumes: config.EventTypeNames{"tick"}}}}},
	}
	return rt, conns, specs
}

func specsOf(m map[string]*connector.Spec) Option {
	return WithSpecs(func(c *config.Connector) (*connector.Spec, error) { return m[c.Path], nil })
}

func TestSpecDeclarationsJoinTheCatalog(t *testing.T) {
	t.Parallel()
	rt, conns, specs := specDeployment(t, `{"required": ["n"], "type": "object", "properties": {"n": {"type": "integer"}}}`)
	c, err := Build(rt, conns, specsOf(specs))
	require.NoError(t, err)
	require.Equal(t, []string{"order.created", "tick"}, c.Names())

	tick := c.Get("tick")
	require.Equal(t, "the spec of connector gen", tick.Origin)
	require.Equal(t, []string{"the spec of connector gen2"}, tick.Shadowed, "the same schema, written differently, from another spec")
	require.Equal(t, []string{"a-gen app/ticks", "b-gen app/more"}, keysOf(tick.Producers), "topics narrows gen's declaration to its ticks stream")
	require.Equal(t, []string{"out app/ticks"}, keysOf(tick.Consumers))
	require.NoError(t, c.Validate("tick", []byte(`{"n":1}`)))
	require.ErrorContains(t, c.Validate("tick", []byte(`{"n":"x"}`)), `event type "tick": at /n:`)

	oc := c.Get("order.created")
	require.True(t, strings.HasPrefix(oc.Origin, "config "+rt.Events[0].File+":3"), oc.Origin)
	require.Equal(t, []string{"the spec of connector gen (a different schema)"}, oc.Shadowed)
	require.NoError(t, c.Validate("order.created", []byte(`{}`)), "config.toml's schema wins over the spec's")
	require.Equal(t, []string{"a-gen app/ticks", "a-gen app/orders"}, keysOf(oc.Producers), "the spec still says gen produces it")

	var warned bool
	for _, f := range c.Check() {
		if f.Type == "order.created" && strings.Contains(f.Message, "the spec of connector gen declares it with a different schema") {
			warned = true
		}
	}
	require.True(t, warned, "Check warns of the overridden schema: %v", c.Check())

	doc, err := c.AsyncAPI(DocInfo{})
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, yaml.Unmarshal(doc, &d))
	msg := d["components"].(map[string]any)["messages"].(map[string]any)["tick"].(map[string]any)
	require.Equal(t, "the spec of connector gen", msg["x-ferry"].(map[string]any)["declared_by"])
	require.Contains(t, d["components"].(map[string]any)["schemas"], "tick")

	// Without the specs, the sink names a type nobody declares.
	_, err = Build(rt, conns)
	require.ErrorContains(t, err, `unknown event type "tick"`)
}

func keysOf(es []Endpoint) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key + " " + e.Address()
	}
	return out
}

func TestSpecDeclarationConflictsAreErrors(t *testing.T) {
	t.Parallel()
	rt, conns, specs := specDeployment(t, `{"type":"string"}`)
	c, err := Build(rt, conns, specsOf(specs))
	require.ErrorContains(t, err, `events[0].name: the spec of connector gen2: event type "tick" is declared by the spec of connector gen too, with a different schema; this declaration is ignored`)
	require.Contains(t, err.Error(), `[events.tick]`)
	require.Equal(t, "the spec of connector gen", c.Get("tick").Origin, "the first source's declaration is kept")
}

func TestSpecDeclarationErrorsNameTheManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifest := filepath.Join(dir, "ferry-plugin.toml")
	schema := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type": 12}`), 0o644))
	spec := connector.NewSpec()
	spec.Events = []connector.EventType{
		{Name: "bad.inline", Schema: `{"type":"object","properties":{"n":{"minimum":"zero"}}}`, File: manifest, Key: "events[0]", Origin: "plugin p's manifest " + manifest + " (events[0])"},
		{Name: "bad.file", SchemaPath: schema, File: manifest, Key: "events[1]", Origin: "plugin p's manifest " + manifest + " (events[1])"},
		{Name: "bad.format", Format: "xml", File: manifest, Key: "events[2]"},
	}
	conns := []*config.Connector{{Type: config.KindSource, Key: "p", Path: manifest, Enabled: true,
		Producers: []config.ProducerStream{{Stream: "s", Topic: "t", ProducedEvents: config.ProducedEvents{Produces: config.EventTypeNames{"bad.file"}}}}}}
	c, err := Build(nil, conns, WithSpecs(func(*config.Connector) (*connector.Spec, error) { return spec, nil }))
	require.Error(t, err)
	for _, want := range []string{
		manifest + ": events[0].schema: the JSON Schema is not valid against its metaschema: at /properties/n/minimum:",
		manifest + ": events[1].schema_path: the JSON Schema is not valid against its metaschema: at /type:",
		manifest + `: events[2].format: expected one of "json_schema", "avro", "proto", got "xml"`,
	} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), `unknown event type "bad.file"`, "a failed declaration is reported once")
	require.Empty(t, c.Types)
	require.Empty(t, c.Endpoints[0].Types)

	// A spec that cannot be read is reported at the connector's path.
	_, err = Build(nil, conns, WithSpecs(func(*config.Connector) (*connector.Spec, error) { return nil, os.ErrPermission }))
	require.ErrorContains(t, err, "path: cannot read the event types its connector declares: permission denied")
}

func TestWithRegistryReadsBuiltInSpecs(t *testing.T) {
	t.Parallel()
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "ticker",
		Spec:      connector.NewSpec().DeclareEvents(connector.EventType{Name: "tick"}),
		NewSource: func(connector.Config) (connector.Source, error) { return nil, nil }}))
	conns := []*config.Connector{
		{Type: config.KindSource, Key: "t", Path: "ticker", Enabled: true, Producers: []config.ProducerStream{{Stream: "s", Topic: "t"}}},
		{Type: config.KindSource, Key: "u", Path: "unknown", Enabled: true, Producers: []config.ProducerStream{{Stream: "s", Topic: "u"}}},
	}
	c, err := Build(nil, conns, WithRegistry(reg))
	require.NoError(t, err, "a path that names nothing declares nothing")
	require.Equal(t, []string{"tick"}, c.Names())
	require.Equal(t, []string{"t s/t"}, keysOf(c.Get("tick").Producers))
}

func TestEventTypeNameRulesAgree(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "order.created", "com.example/x:y-z_1", ".a", "-a", "a b", "é", strings.Repeat("a", 200), strings.Repeat("a", 201), "a\x00"} {
		require.Equal(t, config.ValidEventTypeName(s), connector.ValidEventTypeName(s), "%q", s)
	}
}

// The document of a deployment with types from connectors' specs is one
// @asyncapi/parser accepts (skipped without node and the package, as
// TestAsyncAPIParser).
func TestAsyncAPIParserWithSpecTypes(t *testing.T) {
	t.Parallel()
	node, modules := asyncAPIParser(t)
	rt, conns, specs := specDeployment(t, `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	c, err := Build(rt, conns, specsOf(specs))
	require.NoError(t, err)
	doc, err := c.AsyncAPI(DocInfo{})
	require.NoError(t, err)
	summary, diags, stderr, err := runParser(t, node, modules, doc)
	require.NoError(t, err, "the parser refused the document:\n%s\n%s\ndocument:\n%s", strings.Join(diags, "\n"), stderr, doc)
	require.True(t, summary.Parsed, "no summary from the parser script: %s", stderr)
	require.Zero(t, summary.Errors, "%s", strings.Join(diags, "\n"))
	require.Equal(t, 2, summary.Messages, "order.created and tick")
	require.Equal(t, 3, summary.Channels, "app/ticks, app/orders, app/more: %s", doc)
}
