package eventtypes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func findings(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := copyDir(t, "testdata/deploy")
	// The payments source goes; pg now reads a topic nobody writes
	// order.created to; the ledger's inventory entry is unchanged.
	require.NoError(t, os.Remove(filepath.Join(dir, "connectors", "payments.toml")))
	write(t, filepath.Join(dir, "connectors", "pg.toml"), `type = "sink"
key = "pg"
path = "postgres"

[[streams]]
stream = "shop"
topics = ["archive"]
consumes = ["order.created"]
`)
	c, err := loadDeployment(t, dir)
	require.NoError(t, err)
	fs := c.Check()
	require.True(t, HasErrors(fs))
	require.Equal(t, `error: order.created: sink pg (shop/archive) consumes it, but it is produced only on shop/orders
error: payment.settled: sink ledger (shop/payments) consumes it, but nobody produces it (no source stream lists it in produces, and its entry names no topic)
error: payment.settled: sink ledger (shop/inventory) consumes it, but nobody produces it (no source stream lists it in produces, and its entry names no topic)
`, findings(fs))

	write(t, filepath.Join(dir, "connectors", "pg.toml"), "type = \"sink\"\nkey = \"pg\"\nenabled = false\n[[streams]]\nstream = \"shop\"\ntopics = [\"orders\"]\nconsumes = [\"order.created\"]\n")
	write(t, filepath.Join(dir, "connectors", "ledger.toml"), "type = \"sink\"\nkey = \"ledger\"\n[[streams]]\nstream = \"shop\"\ntopics = [\"inventory\"]\nconsumes = [\"inventory.adjusted\"]\n")
	c, err = loadDeployment(t, dir)
	require.NoError(t, err)
	fs = c.Check()
	require.False(t, HasErrors(fs))
	require.Equal(t, `warning: order.created: produced by source orders (shop/orders), but nobody consumes it
warning: payment.settled: declared, but nobody produces or consumes it
`, findings(fs), "a disabled connector is left out")
}

// schemaCatalog is a catalog of one consumed JSON Schema type.
func schemaCatalog(t *testing.T, format, schema string) *Catalog {
	t.Helper()
	return &Catalog{Types: []*Type{{Name: "x", Format: format, Schema: json.RawMessage(schema),
		Consumers: []Endpoint{{Kind: KindSink, Key: "k", Stream: "s", Topic: "t"}}}}}
}

func TestCompareJSONSchema(t *testing.T) {
	t.Parallel()
	base := `{"type":"object","required":["id","kind","who"],"properties":{
		"id":{"type":"string"},"kind":{"enum":["a","b"]},"n":{"type":"integer"},
		"who":{"$ref":"#/$defs/who"},"tags":{"type":"array","items":{"type":"string"}}},
		"$defs":{"who":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}}`
	for i, tc := range []struct{ schema, want string }{
		{base, ""},
		// Widening is not breaking.
		{strings.Replace(base, `"n":{"type":"integer"}`, `"n":{"type":"number"}`, 1), ""},
		{strings.Replace(base, `"enum":["a","b"]`, `"enum":["a","b","c"]`, 1), ""},
		{strings.Replace(base, `"id":{"type":"string"},`, ``, 1), `error: x at /id: the required property "id" was removed`},
		{strings.Replace(base, `"required":["id","kind","who"]`, `"required":["kind","who"]`, 1), `error: x at /id: the property "id" was required and is now optional`},
		{strings.Replace(base, `"required":["id","kind","who"]`, `"required":["id","kind","who","n"]`, 1), `error: x at /n: the property "n" is newly required`},
		{strings.Replace(base, `"id":{"type":"string"}`, `"id":{"type":"integer"}`, 1), `error: x at /id: type changed from string to integer`},
		{strings.Replace(base, `"enum":["a","b"]`, `"enum":["a"]`, 1), `error: x at /kind: the enum value "b" was removed`},
		{strings.Replace(base, `"type":"object","required":["id"`, `"type":"object","additionalProperties":false,"required":["id"`, 1), `error: x: additionalProperties is now false`},
		{strings.Replace(base, `"required":["name"]`, `"required":["name","age"]`, 1), `error: x at /who/age: the property "age" is newly required`},
		{strings.Replace(base, `"items":{"type":"string"}`, `"items":{"type":"integer"}`, 1), `error: x at /tags/*: type changed from string to integer`},
	} {
		got := findings(Compare(schemaCatalog(t, "json_schema", base), schemaCatalog(t, "json_schema", tc.schema)))
		if tc.want == "" {
			require.Empty(t, got, "case %d", i)
			continue
		}
		require.Contains(t, got, tc.want, "case %d", i)
		require.Equal(t, 1, strings.Count(got, "\n"), "case %d: one finding: %s", i, got)
	}
}

func TestCompareAvroAndTypes(t *testing.T) {
	t.Parallel()
	base := `{"type":"record","name":"R","fields":[{"name":"a","type":"string"},{"name":"b","type":"long"},
		{"name":"s","type":{"type":"enum","name":"S","symbols":["X","Y"]}}]}`
	for i, tc := range []struct{ schema, want string }{
		{base, ""},
		{strings.Replace(base, `]}`, `,{"name":"c","type":"int","default":0}]}`, 1), ""},
		{strings.Replace(base, `{"name":"a","type":"string"},`, ``, 1), `error: x at /a: the field "a" was removed`},
		{strings.Replace(base, `"type":"long"`, `"type":"string"`, 1), `error: x at /b: type changed from "long" to "string"`},
		{strings.Replace(base, `["X","Y"]`, `["X"]`, 1), `error: x at /s: the enum symbol "Y" was removed`},
		{strings.Replace(base, `{"name":"a","type":"string"}`, `{"name":"a","type":"string"},{"name":"c","type":"int"}`, 1), `error: x at /c: the new field "c" has no default`},
	} {
		got := findings(Compare(schemaCatalog(t, "avro", base), schemaCatalog(t, "avro", tc.schema)))
		if tc.want == "" {
			require.Empty(t, got, "case %d", i)
			continue
		}
		require.Contains(t, got, tc.want, "case %d", i)
	}
	old := schemaCatalog(t, "json_schema", `{}`)
	require.Equal(t, "error: x: removed, but sink k (s/t) consumed it\n", findings(Compare(old, &Catalog{})))
	require.Contains(t, findings(Compare(old, schemaCatalog(t, "avro", `"string"`))), "schema format changed from json_schema to avro")
	require.Contains(t, findings(Compare(schemaCatalog(t, "proto", `"a"`), schemaCatalog(t, "proto", `"b"`))), "warning: x: the .proto schema changed")
	unconsumed := &Catalog{Types: []*Type{{Name: "x", Format: "json_schema", Schema: json.RawMessage(`{"type":"string"}`)}}}
	require.Empty(t, Compare(unconsumed, &Catalog{Types: []*Type{{Name: "x", Format: "json_schema", Schema: json.RawMessage(`{"type":"integer"}`)}}}),
		"a type nobody consumes breaks nobody")
}

func TestCatalogJSONRoundTrip(t *testing.T) {
	t.Parallel()
	c := sample(t)
	data, err := json.Marshal(c)
	require.NoError(t, err)
	back, err := ParseCatalog(data)
	require.NoError(t, err)
	require.Equal(t, c.Names(), back.Names())
	require.Empty(t, Compare(c, back), "a catalog compared with its own snapshot has no changes")
	require.Equal(t, c.Get("order.created").Consumers, back.Get("order.created").Consumers)
	require.ErrorIs(t, back.Validate("order.created", []byte(`{}`)), ErrUnknownType, "a snapshot does not validate")

	for i, tc := range []struct{ data, want string }{
		{`[]`, "not a catalog"},
		{`{"types":[{"name":""}]}`, "types[0]: a type needs a name"},
		{`{"types":[{"name":"a","format":"xml"}]}`, `types[0] (a): format "xml" is not known`},
		{`{"types":[{"name":"a","format":"avro"},{"name":"a","format":"avro"}]}`, `type "a" is listed twice`},
		{`{"types":[null]}`, "types[0]: a type needs a name"},
	} {
		_, err := ParseCatalog([]byte(tc.data))
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func FuzzParseCatalog(f *testing.F) {
	c, err := loadDeployment(f, "testdata/deploy")
	require.NoError(f, err)
	data, err := json.Marshal(c)
	require.NoError(f, err)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte(`{"types":[{"name":"a","format":"json_schema","schema":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#"}}},"consumers":[{"kind":"sink"}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(data)
		if err != nil {
			return
		}
		// Whatever it holds compares with itself and with the sample
		// without panicking, and renders as AsyncAPI.
		_ = Compare(c, c)
		_ = Compare(c, &Catalog{})
		_ = c.Check()
		if _, err := c.AsyncAPI(DocInfo{}); err != nil {
			t.Fatalf("AsyncAPI of a parsed catalog: %v", err)
		}
	})
}
