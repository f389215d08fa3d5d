package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
)

func TestManifestInlineSettings(t *testing.T) {
	m, err := ParseManifest("/p/ferry-plugin.toml", []byte(`
name = "pg"
kind = "sink"
command = "bin/pg-sink"
args = ["-v"]
env = ["DATABASE_URL", "PG*"]
[limits]
call_timeout = "5s"
memory_limit = "256MiB"
[[settings]]
name = "dsn"
type = "string"
required = true
secret = true
[[settings]]
name = "timeout"
type = "duration"
default = "2s"
[[settings]]
name = "mode"
type = "enum"
values = ["insert", "upsert"]
default = "insert"
`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Command != "/p/bin/pg-sink" || m.Limits.CallTimeout != 5*time.Second || m.Limits.MemoryLimit != 256<<20 || m.SpecFromCall {
		t.Fatalf("manifest %+v", m)
	}
	if !m.Spec.Secret("dsn") || m.Spec.Field("timeout").Default != 2*time.Second {
		t.Fatalf("spec %+v", m.Spec.Fields)
	}
	if err := m.Spec.Check(connector.PluginConfig{Values: map[string]any{"mode": "delete"}}); err == nil ||
		!strings.Contains(err.Error(), "dsn") || !strings.Contains(err.Error(), "mode") {
		t.Fatalf("check: %v", err)
	}
}

func TestManifestErrorsNameTheirKeys(t *testing.T) {
	_, err := ParseManifest("/p/ferry-plugin.toml", []byte(`
name = "x"
kind = "sinc"
comand = "x"
env = ["*"]
[limits]
call_timeout = "soon"
[[settings]]
name = "a"
type = "strng"
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"kind", "comand", `did you mean "command"`, "env", "limits.call_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	_, err = ParseManifest("/p/ferry-plugin.toml", []byte("name = \"x\"\nkind = \"sink\"\ncommand = \"x\"\nspec = \"inline\"\n[[settings]]\nname = \"a\"\ntype = \"strng\"\n"))
	if err == nil || !strings.Contains(err.Error(), "settings[0].type") {
		t.Fatalf("bad settings type: %v", err)
	}
}

func TestManifestAcceptsTheLinesTransport(t *testing.T) {
	m, err := ParseManifest("/p/ferry-plugin.toml", []byte("name = \"sh\"\nkind = \"sink\"\ncommand = \"./sink.sh\"\ntransport = \"lines\"\n"))
	if err != nil || m.Transport != TransportLines {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestEnvironIsAnAllowlist(t *testing.T) {
	m := &Manifest{Env: []string{"APP_*", "IGGY_CONNECTORS_SINK_X_DSN"}}
	got := Environ(m, []string{"PATH=/bin", "HOME=/root", "APP_MODE=1", "IGGY_PASSWORD=s", "FERRY_API_KEY=k",
		"IGGY_CONNECTORS_SINK_X_DSN=d", "IGGY_CONNECTORS_SINK_Y_DSN=e", "AWS_SECRET=z", "LC_ALL=C"})
	want := "PATH=/bin HOME=/root APP_MODE=1 IGGY_CONNECTORS_SINK_X_DSN=d LC_ALL=C"
	if strings.Join(got, " ") != want {
		t.Fatalf("Environ = %q, want %q", got, want)
	}
}
