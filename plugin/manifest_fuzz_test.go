package plugin

import (
	"strings"
	"testing"
)

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte("name = \"x\"\nkind = \"sink\"\ncommand = \"./x\"\n"))
	f.Add([]byte("name = \"x\"\nkind = \"source\"\ncommand = \"x\"\nspec = \"inline\"\n[[settings]]\nname = \"a\"\ntype = \"duration\"\ndefault = \"5s\"\n[[settings]]\nname = \"l\"\ntype = \"list\"\nelem = { type = \"enum\", name = \"\", values = [\"a\"] }\ndefault = [\"a\"]\n"))
	f.Add([]byte("name = \"x\"\nkind = \"transform\"\ncommand = \"x\"\ntransport = \"lines\"\nenv = [\"A_*\"]\n[limits]\nmemory_limit = \"1GiB\"\ncall_timeout = \"0\"\n"))
	f.Add([]byte("[[settings]]\ntype = \"object\"\nfields = [{name = \"x\", type = \"either\", alternatives = [{name=\"\", type=\"string\"}]}]\n"))
	f.Add([]byte("name = \"x\"\nkind = \"source\"\ncommand = \"x\"\ntransport = \"lines\"\n[[events]]\nname = \"a.b\"\nschema = { type = \"object\" }\ntopics = [\"t\", \"s/t\"]\n[[events]]\nname = \"c\"\nformat = \"avro\"\nschema = '{\"type\":\"string\"}'\n"))
	f.Add([]byte("name = \"x\"\nkind = \"sink\"\ncommand = \"x\"\n[[events]]\nname = \"p\"\nformat = \"protobuf\"\nschema_path = \"a.proto\"\nmessage_type = \"x.Y\"\n[[events]]\nname = \"p\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("/plugins/x/ferry-plugin.toml", data)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an error without words")
			}
			return
		}
		if m.Name == "" || m.Command == "" || m.Limits.CallTimeout <= 0 {
			t.Fatalf("accepted a manifest without name, command or call_timeout: %+v", m)
		}
		if m.SpecFromCall == (m.Spec != nil) {
			t.Fatalf("spec from the call %v with an inline spec %v", m.SpecFromCall, m.Spec != nil)
		}
		seen := map[string]bool{}
		for i, e := range m.Events {
			if err := e.Check(); err != nil || e.Format == "" || seen[e.Name] || e.File != m.File {
				t.Fatalf("accepted events[%d] %+v: %v (twice: %v)", i, e, err, seen[e.Name])
			}
			seen[e.Name] = true
		}
		if m.Spec != nil && len(m.Spec.Events) != len(m.Events) {
			t.Fatalf("the inline spec has %d events, the manifest %d", len(m.Spec.Events), len(m.Events))
		}
	})
}
