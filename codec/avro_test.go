package codec

import (
	"encoding/binary"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/hamba/avro/v2"
	"github.com/stretchr/testify/require"
)

func TestAvroRoundTrip(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaAvro, avroOpts())
	datum, err := c.FromJSON(nil, []byte(eventAvro))
	require.NoError(t, err)
	require.NoError(t, c.Validate(datum))
	out, err := c.ToJSON(nil, datum)
	require.NoError(t, err)
	requireSameJSON(t, eventAvro, string(out))

	// An independent reader (hamba/avro's own decoder) sees the same values.
	s, err := avro.ParseFiles("testdata/event.avsc")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, avro.Unmarshal(s, datum, &got))
	require.Equal(t, int64(9007199254740993), got["id"])
	require.Equal(t, "Grüße 😀", got["name"])
	require.Equal(t, -42, got["count"])
	require.Equal(t, 1.5e300, got["score"])
	require.Equal(t, []byte{0, 1, 255}, got["blob"])
	require.Equal(t, "UPDATED", got["kind"])
	require.Equal(t, map[string]any{"x": int64(1), "y": int64(-9223372036854775808)}, got["attrs"])
}

func TestAvroKnownBytes(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: `{"type":"record","name":"R","fields":[
		{"name":"a","type":"long"},{"name":"s","type":"string"},{"name":"u","type":["null","int"]}]}`})
	b, err := c.FromJSON(nil, []byte(`{"s":"hi","a":-1,"u":3}`))
	require.NoError(t, err)
	require.Equal(t, []byte{0x01, 0x04, 'h', 'i', 0x02, 0x06}, b, "zigzag -1, length 2, union branch 1, zigzag 3")
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	require.Equal(t, `{"a":-1,"s":"hi","u":3}`, string(out))
}

func TestAvroDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaAvro, avroOpts())
	base := `{"id":1,"name":"n","count":1,"score":1,"ratio":1,"active":false,"tags":[],"address":{"street":"s","city":"c"},
"kind":"CREATED","attrs":{},"blob":"bytes as text","digest":"abcd"}`
	b, err := c.FromJSON(nil, []byte(base))
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, `{"id":1,"name":"n","count":1,"score":1,"ratio":1,"active":false,"tags":[],"address":{"street":"s","city":"c"},
"kind":"CREATED","attrs":{},"blob":[98,121,116,101,115,32,97,115,32,116,101,120,116],"digest":[97,98,99,100],"note":null,"version":1}`, string(out))

	for i, tc := range []struct{ doc, want string }{
		{`[1]`, "JSON array does not match Avro type ferry.test.Event"},
		{`{"id":1}`, "$.name: JSON null does not match Avro type string"},
		{`{"id":1.5}`, "$.id: JSON number does not match Avro type long"},
		{`{"id":92233720368547758070}`, "out of range for Avro long"},
		{`{"id":1,"name":"n","count":2147483648}`, "out of range for Avro int"},
		{`{"id":1,"name":"n","count":1,"score":1,"ratio":1,"active":false,"tags":[],"address":{"street":"s","city":"c"},"kind":"NOPE"}`, `"NOPE" is not a symbol of Avro enum ferry.test.Kind`},
		{`{"id":1,"name":"n","count":1,"score":1,"ratio":1,"active":false,"tags":[],"address":{"street":"s","city":"c"},"kind":"CREATED","attrs":{},"note":5}`, "$.note: JSON number"},
		{`{"id":`, "not valid JSON"},
	} {
		_, err := c.FromJSON(nil, []byte(tc.doc))
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	for i, p := range [][]byte{{}, {0x02}, append(append([]byte(nil), b...), 0), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}} {
		require.Error(t, c.Validate(p), "case %d", i)
	}
	_, err = mustNew(t, connector.SchemaAvro, Options{}).ToJSON(nil, []byte{2})
	require.ErrorIs(t, err, ErrNotMapped)
}

func TestAvroStrict(t *testing.T) {
	t.Parallel()
	schema := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	lax := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: schema})
	strict := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: schema, StrictJSON: true})
	_, err := lax.FromJSON(nil, []byte(`{"a":1,"extra":true}`))
	require.NoError(t, err, "unknown members are ignored, as upstream")
	_, err = strict.FromJSON(nil, []byte(`{"a":1,"extra":true}`))
	require.ErrorContains(t, err, `Avro record R has no field "extra"`)
}

func TestAvroRecursive(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: `{"type":"record","name":"Node","fields":[
		{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`})
	doc := `{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}`
	b, err := c.FromJSON(nil, []byte(doc))
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	require.Equal(t, doc, string(out))
}

func TestAvroFraming(t *testing.T) {
	t.Parallel()
	schema := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	s, err := avro.Parse(schema)
	require.NoError(t, err)
	fp, err := s.FingerprintUsing(avro.CRC64Avro)
	require.NoError(t, err)

	so := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: schema, AvroFraming: FramingSingleObject})
	b, err := so.FromJSON(nil, []byte(`{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, []byte{0xC3, 0x01}, b[:2])
	require.Equal(t, binary.BigEndian.Uint64(fp), binary.LittleEndian.Uint64(b[2:10]), "the CRC-64-AVRO fingerprint, little-endian")
	require.Equal(t, []byte{0x02}, b[10:])
	out, err := so.ToJSON(nil, b)
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(out))
	bad := append([]byte(nil), b...)
	bad[5] ^= 0xff
	require.ErrorContains(t, so.Validate(bad), "schema fingerprint")
	require.ErrorContains(t, so.Validate([]byte{0x02}), "single-object")

	cf := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: schema, AvroFraming: FramingConfluent, AvroSchemaID: 7})
	b, err = cf.FromJSON(nil, []byte(`{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 0, 0, 7, 0x02}, b)
	require.NoError(t, cf.Validate(b))
	require.ErrorContains(t, cf.Validate([]byte{0, 0, 0, 0, 8, 0x02}), "schema id 8, want 7")
	require.ErrorContains(t, cf.Validate([]byte{1, 0, 0, 0, 7, 0x02}), "magic byte")
	anyID := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: schema, AvroFraming: FramingConfluent})
	require.NoError(t, anyID.Validate([]byte{0, 0, 0, 0, 8, 0x02}), "without an id, any id is read")
}
