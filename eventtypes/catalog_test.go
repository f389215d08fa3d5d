package eventtypes

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

func TestBuildSample(t *testing.T) {
	t.Parallel()
	c := sample(t)
	require.Equal(t, []string{"inventory.adjusted", "order.cancelled", "order.created", "payment.settled"}, c.Names())
	require.Equal(t, "127.0.0.1:8090", c.Server)

	created := c.Get("order.created")
	require.Equal(t, "1.2.0", created.Version)
	require.Equal(t, config.EventFormatJSONSchema, created.Format)
	require.Equal(t, []Endpoint{{Kind: KindSource, Key: "orders", Plugin: "random", Stream: "shop", Topic: "orders", Schema: "json",
		Types: []string{"order.created", "order.cancelled"}}}, created.Producers)
	require.Len(t, created.Consumers, 1)
	require.Equal(t, "pg", created.Consumers[0].Key)

	cancelled := c.Get("order.cancelled")
	require.Len(t, cancelled.Consumers, 1)
	require.Equal(t, KindHook, cancelled.Consumers[0].Kind, "a sink hook-NAME with path exec is a hook")

	inv := c.Get("inventory.adjusted")
	require.Equal(t, []Endpoint{{Kind: KindTopic, Stream: "shop", Topic: "inventory", Types: []string{"inventory.adjusted"}}}, inv.Producers,
		"a topic its entry names produces it")
	require.Equal(t, "ledger", inv.Consumers[0].Key)
	require.Len(t, c.Endpoints, 6, "two sources, the ledger's two topics, pg and the hook")
	require.Empty(t, c.Check(), "the sample deployment is consistent")
}

func TestValidateJSONSchema(t *testing.T) {
	t.Parallel()
	c := sample(t)
	ok := `{"type":"order.created","order_id":"o-1","customer":{"id":"c-1"},"total":12.5,"currency":"EUR","lines":[{"sku":"a","quantity":2}]}`
	require.NoError(t, c.Validate("order.created", []byte(ok)))

	for i, tc := range []struct{ payload, want string }{
		{`{"type":"order.created","order_id":"o-1","customer":{},"total":1}`, `at /customer: missing property 'id'`},
		{`{"type":"order.created","order_id":"o-1","customer":{"id":"c"},"total":-1}`, `at /total: minimum: got -1, want 0`},
		{`{"type":"order.created","order_id":"o-1","customer":{"id":"c"},"total":1,"lines":[{"sku":"a","quantity":0}]}`, `at /lines/0/quantity:`},
		{`{"type":"order.created","order_id":"o-1","customer":{"id":"c"},"total":1,"currency":"JPY"}`, `at /currency: value must be one of`},
		{`{"order_id":""}`, `at /: missing properties 'type', 'customer', 'total'`},
		{`not json`, `at /: the payload is not JSON`},
	} {
		err := c.Validate("order.created", []byte(tc.payload))
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, "case %d", i)
		require.ErrorContains(t, err, tc.want, "case %d", i)
		require.True(t, strings.HasPrefix(err.Error(), `event type "order.created": `), "case %d: %v", i, err)
	}
	// Draft-07 schema.
	require.NoError(t, c.Validate("order.cancelled", []byte(`{"type":"order.cancelled","order_id":"o"}`)))
	require.ErrorContains(t, c.Validate("order.cancelled", []byte(`{"type":"order.cancelled","order_id":7}`)), "at /order_id: got number, want string")
	require.ErrorIs(t, c.Validate("nope", []byte(`{}`)), ErrUnknownType)
}

func TestValidateAvroAndProto(t *testing.T) {
	t.Parallel()
	c := sample(t)
	require.NoError(t, c.Validate("payment.settled", []byte(`{"payment_id":"p","amount_cents":100,"status":"SETTLED"}`)))
	require.ErrorContains(t, c.Validate("payment.settled", []byte(`{"payment_id":"p","amount_cents":100,"status":"LOST"}`)), `event type "payment.settled"`)
	require.Error(t, c.Validate("payment.settled", []byte(`{"payment_id":"p","amount_cents":100,"status":"SETTLED","extra":1}`)), "unknown members are refused")

	// The Avro binary form: a string "p", long 100 (zig-zag 200), enum index 1.
	bin := []byte{2, 'p', 0xc8, 0x01, 2}
	require.NoError(t, c.ValidateEncoded("payment.settled", connector.SchemaAvro, bin))
	require.Error(t, c.ValidateEncoded("payment.settled", connector.SchemaAvro, bin[:3]))
	require.ErrorContains(t, c.ValidateEncoded("order.created", connector.SchemaAvro, bin), "convert it to JSON first")

	require.NoError(t, c.Validate("inventory.adjusted", []byte(`{"sku":"a","warehouse":"w","delta":-3}`)))
	require.Error(t, c.Validate("inventory.adjusted", []byte(`{"sku":"a","colour":"red"}`)))
	require.NoError(t, c.ValidateEncoded("inventory.adjusted", connector.SchemaProto, []byte{0x0a, 0x01, 'a', 0x18, 0x05}))
	require.Error(t, c.ValidateEncoded("inventory.adjusted", connector.SchemaProto, []byte{0x0a, 0x09, 'a'}))
}

func TestTypeOf(t *testing.T) {
	t.Parallel()
	two := []string{"order.created", "order.cancelled"}
	for i, tc := range []struct {
		declared      []string
		ce, payload   string
		want, wantErr string
	}{
		{[]string{"a"}, "", `{}`, "a", ""},
		{[]string{"a"}, "b", `{}`, "", `event type "b" (its ce_type header), which the stream does not declare`},
		{two, "order.cancelled", `{"type":"order.created"}`, "order.cancelled", ""},
		{two, "", `{"type":"order.created"}`, "order.created", ""},
		{two, "", `{"type":"order.shipped"}`, "", `"order.shipped" (its "type" member)`},
		{two, "", `{"id":1}`, "", "names no event type"},
		{two, "", `\x00binary`, "", "names no event type"},
	} {
		got, err := TypeOf(tc.declared, tc.ce, []byte(tc.payload))
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, got, "case %d", i)
	}
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	dir := copyDir(t, "testdata/deploy")
	write(t, filepath.Join(dir, "connectors", "pg.toml"), `type = "sink"
key = "pg"
path = "postgres"

[[streams]]
stream = "shop"
topics = ["orders"]
consumes = ["order.created", "order.creatd"]
`)
	write(t, filepath.Join(dir, "schemas", "order.cancelled.json"), `{"type": "object", "properties": {"a": {"type": 12}}}`)
	c, err := loadDeployment(t, dir)
	var errs config.Errors
	require.True(t, errors.As(err, &errs), "%v", err)
	require.Len(t, errs, 2, "%v", err)
	require.ErrorContains(t, errs[0], `config.toml:17: events."order.cancelled".schema_path: the JSON Schema is not valid against its metaschema: at /properties/a/type: `)
	require.ErrorContains(t, errs[1], `pg.toml:8: streams[0].consumes[1]: unknown event type "order.creatd"; did you mean "order.created"?`)
	require.NotNil(t, c, "the catalog is built without what failed")
	require.Nil(t, c.Get("order.cancelled"))
	require.Equal(t, []string{"order.created"}, c.Get("order.created").Consumers[0].Types)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, tc := range []struct{ src, want string }{
		{"[events.\"a b\"]\n", `config.toml:1: events."a b": "a b" is not an event type name`},
		{"[events.x]\nschema_path = \"missing.json\"\n", "config.toml:2: events.x.schema_path: cannot read the schema file"},
		{"[events.x]\nformat = \"xml\"\n", `config.toml:2: events.x.format: expected one of "json_schema", "avro", "proto", got "xml"`},
		{"[events.x]\nformat = \"proto\"\n", "events.x.schema_path: required with format = \"proto\""},
		{"[events.x]\ndescripton = \"\"\n", `config.toml:2: events.x.descripton: unknown key; did you mean "description"?`},
		{"[events.x]\ntopics = [\"orders\"]\n", `events.x.topics[0]: expected "stream/topic", got "orders"`},
		{"[events.x]\nversion = 2\n", "events.x.version: expected a string, got an integer (2)"},
	} {
		_, err := config.Parse(filepath.Join(dir, "config.toml"), []byte("[connectors]\nconfig_dir = \".\"\n"+tc.src), noEnv)
		require.Error(t, err, "case %d", i)
		// The first two lines are the [connectors] table.
		require.Contains(t, shiftLines(err.Error(), 2), tc.want, "case %d", i)
	}
	for i, tc := range []struct{ src, want string }{
		{"produces = \"a\"", `gen.toml:6: streams[0].produces: expected an array of event type names, got the string "a"; write ["a"]`},
		{"produces = [\"a\", \"a\"]", `streams[0].produces[1]: "a" is listed twice`},
		{"produces = [\"-a\"]", `streams[0].produces[0]: "-a" is not an event type name`},
		{"consumes = [\"a\"]", `streams[0].consumes: unknown key`},
	} {
		_, err := config.ParseConnector("gen.toml", []byte("type = \"source\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n"+tc.src+"\n"), noEnv)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

// shiftLines renumbers "config.toml:N:" in s by -n, so that cases read as
// if their snippet started the file.
func shiftLines(s string, n int) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "config.toml:")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len("config.toml:")])
		s = s[i+len("config.toml:"):]
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			continue
		}
		line, _ := strconv.Atoi(s[:j])
		b.WriteString(strconv.Itoa(line - n))
		s = s[j:]
	}
}

func TestRenderedBack(t *testing.T) {
	t.Parallel()
	c, err := config.ParseConnector("gen.toml", []byte("type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nconsumes = [\"a.b\", \"c\"]\n"), noEnv)
	require.NoError(t, err)
	out, err := c.MarshalTOML()
	require.NoError(t, err)
	require.Contains(t, string(out), `consumes = ["a.b", "c"]`)
	back, err := config.ParseConnector("gen.toml", out, noEnv)
	require.NoError(t, err)
	require.Equal(t, c.Consumers[0].Consumes, back.Consumers[0].Consumes)
	j, err := c.MarshalJSON()
	require.NoError(t, err)
	require.Contains(t, string(j), `"consumes":["a.b","c"]`)

	plain, err := config.ParseConnector("gen.toml", []byte("type = \"source\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n"), noEnv)
	require.NoError(t, err)
	out, err = plain.MarshalTOML()
	require.NoError(t, err)
	require.NotContains(t, string(out), "produces", "absent means nothing declared, and nothing rendered")
}
