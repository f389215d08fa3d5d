package connector

import (
	"strings"
	"testing"
)

func TestDescribeListsDeclaredEventTypes(t *testing.T) {
	spec := NewSpec(NewStringField("path")).DeclareEvents(
		EventType{Name: "line.read", Version: "1.0.0", Description: "a line", Schema: `{"type":"object"}`, Topics: []string{"lines"}},
		EventType{Name: "pay", SchemaPath: "/s/pay.avsc"})
	var b strings.Builder
	if err := Describe(&b, Info{Kind: KindSource, Name: "x", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nevent types it produces:\n",
		"  line.read 1.0.0            json_schema, inline schema, on lines\n",
		"a line\n",
		"  pay                        avro, /s/pay.avsc, on all its topics\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Describe wrote\n%s\nwithout %q", b.String(), want)
		}
	}
	b.Reset()
	if err := Describe(&b, Info{Kind: KindSink, Name: "y", Spec: NewSpec()}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "event types") {
		t.Errorf("a spec without events lists some:\n%s", b.String())
	}
}
