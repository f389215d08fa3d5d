package host_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ferryhq/ferry/api"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/runtime"
)

// lineSchema accepts {"n": 0} to {"n": 5}.
const lineSchema = `{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer", "maximum": 5}}}`

// TestPluginManifestDeclaresEventTypes runs the example Go source plugin
// (its settings from its Spec call) under a manifest whose [[events]]
// declares the type of what it sends, with a JSON Schema file next to
// the manifest: the lines that do not match are dead-lettered with the
// validation error and the others sent; GET /events lists the type with
// the manifest as its origin, and GET /asyncapi.yaml describes it.
func TestPluginManifestDeclaresEventTypes(t *testing.T) {
	srcBin := build(t, "examples/plugins/go-source")
	m := manifest(t, "go-source", "source", srcBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n"+
		"[[events]]\nname = \"line.read\"\nversion = \"1.0.0\"\ndescription = \"a line of the input\"\nschema_path = \"schemas/line.json\"\n")
	if err := os.MkdirAll(filepath.Join(filepath.Dir(m), "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(m), "schemas", "line.json"), []byte(lineSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	in, want := writeInput(t, 10) // {"n":0} … {"n":9}: 6..9 do not match
	src := strings.Replace(sourceFile(m, in), "linger_time = \"0\"\n", "linger_time = \"0\"\ndead_letter_topic = \"bad_lines\"\n", 1)
	rt := connectortest.Start(t, map[string]string{"src.toml": src}, connectortest.WithRegistry(registry()))

	var sent, dead []string
	connectortest.Eventually(t, "six lines sent and four dead-lettered", func() bool {
		sent, dead = payloadsOf(rt.Messages(t, "s", "t")), payloadsOf(rt.Messages(t, "s", "bad_lines"))
		return len(sent) >= 6 && len(dead) >= 4
	})
	if strings.Join(sent, " ") != strings.Join(want[:6], " ") || strings.Join(dead, " ") != strings.Join(want[6:], " ") {
		t.Fatalf("sent %q, dead-lettered %q", sent, dead)
	}
	for _, msg := range rt.Messages(t, "s", "bad_lines") {
		v, ok := wire.Lookup(msg.Headers, runtime.HeaderDLQError)
		if !ok || !strings.Contains(v.String(), `event type "line.read": at /n: maximum:`) {
			t.Fatalf("dead letter %s: error header %q", msg.Payload, v.String())
		}
	}

	url := serveAPI(t, rt)
	var body struct {
		Types []struct {
			Name, Version, Origin string
			SchemaFile            string `json:"schema_file"`
			Producers             []struct{ Key, Stream, Topic string }
		}
		Errors []string
	}
	if err := json.Unmarshal(get(t, url+"/events"), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Errors) > 0 || len(body.Types) != 1 {
		t.Fatalf("GET /events: %+v", body)
	}
	ty := body.Types[0]
	if ty.Name != "line.read" || ty.Version != "1.0.0" || ty.Origin != "plugin go-source's manifest "+m+" (events[0])" ||
		ty.SchemaFile != filepath.Join(filepath.Dir(m), "schemas", "line.json") ||
		len(ty.Producers) != 1 || ty.Producers[0].Key != "src" || ty.Producers[0].Topic != "t" {
		t.Fatalf("GET /events' type: %+v", ty)
	}
	var doc struct {
		Channels   map[string]struct{ Messages map[string]any }
		Operations map[string]struct {
			Action   string
			Messages []map[string]string
		}
		Components struct {
			Messages map[string]struct {
				Payload map[string]string
				Ferry   map[string]string `yaml:"x-ferry"`
			}
			Schemas map[string]any
		}
	}
	if err := yaml.Unmarshal(get(t, url+"/asyncapi.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	msg, ok := doc.Components.Messages["line.read"]
	if !ok || msg.Payload["$ref"] != "#/components/schemas/line.read" || msg.Ferry["declared_by"] != ty.Origin {
		t.Fatalf("AsyncAPI message: %+v", doc.Components.Messages)
	}
	if _, ok := doc.Components.Schemas["line.read"]; !ok {
		t.Fatalf("AsyncAPI schemas: %v", doc.Components.Schemas)
	}
	if _, ok := doc.Channels["s.t"].Messages["line.read"]; !ok {
		t.Fatalf("AsyncAPI channels: %+v", doc.Channels)
	}
	var sends int
	for _, op := range doc.Operations {
		if op.Action == "send" && len(op.Messages) == 1 && op.Messages[0]["$ref"] == "#/channels/s.t/messages/line.read" {
			sends++
		}
	}
	if sends != 1 {
		t.Fatalf("AsyncAPI operations: %+v", doc.Operations)
	}
}

// A schema in a manifest that is not a valid JSON Schema stops the
// connector with an error naming the manifest and the key.
func TestPluginManifestWithABadSchemaIsAnError(t *testing.T) {
	srcBin := build(t, "examples/plugins/go-source")
	m := manifest(t, "go-source", "source", srcBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n"+
		"[[events]]\nname = \"line.read\"\nschema = '{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integr\"}}}'\n")
	in, _ := writeInput(t, 3)
	rt := connectortest.Start(t, map[string]string{"src.toml": sourceFile(m, in)}, connectortest.WithRegistry(registry()))
	var i runtime.Info
	connectortest.Eventually(t, "the source fails", func() bool {
		i = info(rt, "source", "src")
		return i.Status == runtime.StatusError
	})
	wantErr := m + ": events[0].schema: the JSON Schema is not valid against its metaschema: at /properties/n/type:"
	if !strings.Contains(i.LastError, wantErr) {
		t.Fatalf("last error %q, want it to say %q", i.LastError, wantErr)
	}
	if got := rt.Messages(t, "s", "t"); len(got) != 0 {
		t.Fatalf("%d messages sent by a source whose event type does not build", len(got))
	}
	body := get(t, serveAPI(t, rt)+"/events")
	if !strings.Contains(string(body), strings.ReplaceAll(wantErr, `"`, `\"`)) {
		t.Fatalf("GET /events does not report %q: %s", wantErr, body)
	}
}

func payloadsOf(ms []iggy.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload)
	}
	return out
}

// serveAPI starts the management API over rt and returns its URL.
func serveAPI(t *testing.T, rt *connectortest.Runtime) string {
	t.Helper()
	srv, err := api.New(rt.Runtime, config.HTTP{Address: "127.0.0.1:0", APIKey: "test-key", Metrics: config.HTTPMetrics{Endpoint: "/metrics"}},
		nil, api.WithTokenDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + srv.Addr()
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.APIKeyHeader, "test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", url, resp.StatusCode, err, b)
	}
	return b
}

// A line-protocol plugin's settings are its manifest's; its [[events]]
// reach the spec the registry resolves its path to, as a gRPC plugin's
// do beside its Spec call's settings.
func TestResolvedSpecCarriesTheManifestsEventTypes(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "ferry-plugin.toml")
	if err := os.WriteFile(m, []byte("name = \"sh\"\nkind = \"sink\"\ncommand = \"./sink.sh\"\ntransport = \"lines\"\n"+
		"[[events]]\nname = \"line.read\"\nschema = { type = \"object\" }\ntopics = [\"app/lines\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, ok, err := registry().Resolve("sink", "ferry-plugin.toml", dir)
	if err != nil || !ok {
		t.Fatalf("resolve: %v %v", ok, err)
	}
	if len(info.Spec.Events) != 1 || info.Spec.Events[0].Name != "line.read" || info.Spec.Events[0].Schema != `{"type":"object"}` ||
		!info.Spec.Events[0].AppliesTo("app", "lines") || info.Spec.Events[0].AppliesTo("app", "other") {
		t.Fatalf("spec events %+v", info.Spec.Events)
	}
}

// The sink side: the example Go sink plugin's manifest declares the type
// it consumes; the messages that do not match are dead-lettered with the
// validation error and the plugin writes the others.
func TestSinkPluginManifestDeclaresEventTypes(t *testing.T) {
	srcBin, snkBin := build(t, "examples/plugins/go-source"), build(t, "examples/plugins/go-sink")
	srcM := manifest(t, "go-source", "source", srcBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n")
	snkM := manifest(t, "go-sink", "sink", snkBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n"+
		"[[events]]\nname = \"line.read\"\nschema = '"+lineSchema+"'\n")
	in, want := writeInput(t, 10)
	out := filepath.Join(t.TempDir(), "out.txt")
	snk := sinkFile(snkM, out, "") + "on_error = \"dead_letter\"\ndead_letter_topic = \"refused\"\n"
	rt := connectortest.Start(t, map[string]string{"src.toml": sourceFile(srcM, in), "dst.toml": snk},
		connectortest.WithRegistry(registry()))
	var dead []string
	connectortest.Eventually(t, "six lines written and four dead-lettered", func() bool {
		dead = payloadsOf(rt.Messages(t, "s", "refused"))
		return len(lines(t, out)) >= 6 && len(dead) >= 4
	})
	if got := lines(t, out); strings.Join(got, " ") != strings.Join(want[:6], " ") || strings.Join(dead, " ") != strings.Join(want[6:], " ") {
		t.Fatalf("written %q, dead-lettered %q", got, dead)
	}
	for _, msg := range rt.Messages(t, "s", "refused") {
		if v, ok := wire.Lookup(msg.Headers, runtime.HeaderDLQError); !ok || !strings.Contains(v.String(), `event type "line.read": at /n: maximum:`) {
			t.Fatalf("dead letter %s: error header %q", msg.Payload, v.String())
		}
	}
}
