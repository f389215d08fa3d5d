package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

func TestManifestDeclaresEventTypes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "line.json"), []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "pay.avsc"), []byte(`{"type":"record","name":"P","fields":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, ManifestName)
	m, err := ParseManifest(file, []byte(`
name = "lines"
kind = "source"
command = "./lines"
transport = "lines"

[[events]]
name = "line.read"
description = "a line"
version = "1.0.0"
schema_path = "schemas/line.json"
topics = ["lines", "s/other"]

[[events]]
name = "line.table"
schema = { type = "object", required = ["n"], properties = { n = { type = "integer" } } }

[[events]]
name = "line.text"
schema = '{"type": "string"}'

[[events]]
name = "pay.settled"
schema_path = "schemas/pay.avsc"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Events) != 4 || m.Spec == nil || len(m.Spec.Events) != 4 {
		t.Fatalf("events %+v, spec %+v", m.Events, m.Spec)
	}
	read := m.Events[0]
	if read.SchemaPath != filepath.Join(dir, "schemas", "line.json") || read.Format != connector.EventFormatJSONSchema ||
		read.Version != "1.0.0" || read.Key != "events[0]" || read.File != file ||
		read.Origin != "plugin lines's manifest "+file+" (events[0])" {
		t.Fatalf("events[0] = %+v", read)
	}
	if !read.AppliesTo("a", "lines") || !read.AppliesTo("s", "other") || read.AppliesTo("a", "other") {
		t.Fatalf("topics %v apply wrongly", read.Topics)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(m.Events[1].Schema), &doc); err != nil || doc["type"] != "object" {
		t.Fatalf("a schema table becomes its JSON: %q %v", m.Events[1].Schema, err)
	}
	if m.Events[2].Schema != `{"type": "string"}` {
		t.Fatalf("inline JSON text: %q", m.Events[2].Schema)
	}
	if m.Events[3].Format != connector.EventFormatAvro {
		t.Fatalf("a .avsc file is avro: %+v", m.Events[3])
	}
}

func TestManifestEventErrorsNameTheFileAndKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), ManifestName)
	_, err := ParseManifest(file, []byte(`
name = "x"
kind = "sink"
command = "x"
spec = "call"

[[events]]
name = "a.b"
schema_path = "missing.json"

[[events]]
name = "bad name!"
schema = "{not json"

[[events]]
name = "p"
format = "proto"

[[events]]
name = "a.b"
schma = "{}"
topics = ["s/"]
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		file + ": events[0].schema_path: cannot read the schema file " + filepath.Join(filepath.Dir(file), "missing.json"),
		file + `: events[1].name: "bad name!" is not an event type name`,
		file + ": events[1].schema: the json_schema schema is not valid JSON",
		file + `: events[2].schema_path: required with format = "proto"`,
		file + `: events[2].message_type: required with format = "proto"`,
		"events[3].schma", `did you mean "schema"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_, err = ParseManifest(file, []byte("name = \"x\"\nkind = \"sink\"\ncommand = \"x\"\n[[events]]\nname = \"a\"\n[[events]]\nname = \"a\"\ntopics = [\"t\"]\n"))
	if err == nil || !strings.Contains(err.Error(), file+`: events[1].name: event type "a" is declared twice`) {
		t.Fatalf("a name twice: %v", err)
	}
	_, err = ParseManifest(file, []byte("name = \"x\"\nkind = \"sink\"\ncommand = \"x\"\n[[events]]\nname = \"a\"\ntopics = [\"s/\", \"a/b/c\"]\n"))
	if err == nil || !strings.Contains(err.Error(), `events[0].topics[0]: expected "TOPIC" or "STREAM/TOPIC", got "s/"`) ||
		!strings.Contains(err.Error(), `events[0].topics[1]`) {
		t.Fatalf("bad topics: %v", err)
	}
	_, err = ParseManifest(file, []byte("name = \"x\"\nkind = \"sink\"\ncommand = \"x\"\n[[events]]\nname = \"a\"\nschema = 3\n"))
	if err == nil || !strings.Contains(err.Error(), "events[0].schema: expected the schema as JSON text") {
		t.Fatalf("a number as schema: %v", err)
	}
}

func TestDeclareEventsRefusesBadDeclarations(t *testing.T) {
	s := connector.NewSpec().DeclareEvents(connector.EventType{Name: "tick", Schema: `{"type":"object"}`})
	if len(s.Events) != 1 || s.Events[0].Format != connector.EventFormatJSONSchema {
		t.Fatalf("events %+v", s.Events)
	}
	for _, bad := range []connector.EventType{{Name: ""}, {Name: "t", Schema: "{"}, {Name: "t", SchemaPath: "rel.json"}, {Name: "tick"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("DeclareEvents(%+v) did not panic", bad)
				}
			}()
			s.DeclareEvents(bad)
		}()
	}
}
