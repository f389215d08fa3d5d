package codec

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// event.bin was written by flatc itself from event.json.
func TestFlatBufferReadsFlatc(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaFlatBuffer, fbOpts())
	bin, err := os.ReadFile("testdata/event.bin")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/event.json")
	require.NoError(t, err)
	require.NoError(t, c.Validate(bin))
	out, err := c.ToJSON(nil, bin)
	require.NoError(t, err)
	requireSameJSON(t, string(want), string(out))
}

func TestFlatBufferRoundTrip(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaFlatBuffer, fbOpts())
	doc, err := os.ReadFile("testdata/event.json")
	require.NoError(t, err)
	b, err := c.FromJSON(nil, doc)
	require.NoError(t, err)
	require.Equal(t, "EVNT", string(b[4:8]), "the schema's file identifier")
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, string(doc), string(out))

	// flatc reads what Ferry wrote, when it is installed.
	flatc, err := exec.LookPath("flatc")
	if err != nil {
		t.Log("flatc not installed; skipping the cross-check with flatc")
		return
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ours.bin"), b, 0o644))
	cmd := exec.Command(flatc, "--json", "--strict-json", "--raw-binary", "-o", dir, "testdata/event.fbs", "--", filepath.Join(dir, "ours.bin"))
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	theirs, err := os.ReadFile(filepath.Join(dir, "ours.json"))
	require.NoError(t, err)
	requireSameJSON(t, string(doc), string(theirs))
}

func TestFlatBufferDefaults(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaFlatBuffer, fbOpts())
	b, err := c.FromJSON(nil, []byte(`{"id":0,"name":"x","ignored":true}`))
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, `{"id":0,"name":"x","count":0,"score":0,"ratio":0,"active":false,"kind":"Created","level":5,"big":0}`, string(out),
		"scalars the buffer omits read as their defaults; the optional scalar stays absent")
	b, err = c.FromJSON(nil, []byte(`{"attachment_type":"Note","attachment":{"text":"t"},"kind":2,"maybe":0}`))
	require.NoError(t, err)
	out, err = c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, `{"id":0,"count":0,"score":0,"ratio":0,"active":false,"kind":"Deleted","level":5,"big":0,"maybe":0,
"attachment_type":"Note","attachment":{"text":"t"}}`, string(out))
}

func TestFlatBufferErrors(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaFlatBuffer, fbOpts())
	for i, tc := range []struct{ doc, want string }{
		{`[1]`, "want a JSON object for table ferry.test.Event"},
		{`{"kind":"Sideways"}`, `$.kind: "Sideways" is not a value of ferry.test.Kind`},
		{`{"level":70000}`, "$.level: 70000 is out of range for a 16-bit integer"},
		{`{"name":5}`, "$.name: want a string"},
		{`{"pos":{"x":1}}`, `struct ferry.test.Vec2 needs field "y"`},
		{`{"attachment":{"url":"u"}}`, "union value without attachment_type"},
		{`{"attachment_type":"Nope","attachment":{}}`, `"Nope" is not a value of ferry.test.Attachment`},
		{`{"blob":[256]}`, "out of range for a 8-bit unsigned integer"},
		{`{"tags":"x"}`, "$.tags: want an array"},
	} {
		_, err := c.FromJSON(nil, []byte(tc.doc))
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	strict := mustNew(t, connector.SchemaFlatBuffer, Options{FlatBufferSchemaPath: "testdata/event.bfbs", StrictJSON: true})
	_, err := strict.FromJSON(nil, []byte(`{"id":1,"extra":2}`))
	require.ErrorContains(t, err, `table ferry.test.Event has no field "extra"`)

	bin, err := os.ReadFile("testdata/event.bin")
	require.NoError(t, err)
	for i, p := range [][]byte{nil, {1, 2, 3}, bin[:len(bin)/2], {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}} {
		require.Error(t, c.Validate(p), "case %d", i)
	}
	opaque := mustNew(t, connector.SchemaFlatBuffer, Options{})
	require.NoError(t, opaque.Validate(bin), "without a schema, the root table is checked")
	require.Error(t, opaque.Validate([]byte{1, 2}))
}
