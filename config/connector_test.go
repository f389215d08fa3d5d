package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func readConnector(t *testing.T, file string, opts ...Option) *Connector {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	if len(opts) == 0 {
		opts = []Option{noEnv}
	}
	c, err := ParseConnector(file, data, opts...)
	require.NoError(t, err)
	return c
}

func TestParseUpstreamConnectors(t *testing.T) {
	t.Parallel()
	src := readConnector(t, "testdata/upstream/connectors/random_source.toml")
	require.Equal(t, KindSource, src.Type)
	require.Equal(t, "random", src.Key)
	require.True(t, src.Enabled)
	require.Equal(t, uint64(0), src.Version)
	require.Equal(t, "Random numbers", src.Name)
	require.Equal(t, "target/release/libiggy_connector_random_source", src.Path)
	require.Equal(t, "random", src.PluginName())
	require.Equal(t, FormatJSON, src.PluginConfigFormat)
	require.True(t, src.Benchmark)
	require.False(t, src.Verbose)
	require.Equal(t, []ProducerStream{{Stream: "demo_stream", Topic: "demo_topic", Schema: SchemaJSON, BatchLength: 500, LingerTime: 10 * time.Millisecond}}, src.Producers)
	require.Empty(t, src.Consumers)
	require.Equal(t, map[string]any{"interval": "250ms", "max_count": int64(5000), "messages_range": []any{int64(5), int64(25)}, "payload_size": int64(64)}, src.PluginConfig)
	require.Equal(t, []Transform{
		{Name: "add_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{
			map[string]any{"key": "origin", "value": map[string]any{"static": "random-source"}},
		}}, Lines: map[string]int{"": 23, "enabled": 24, "fields": 26, "fields[0]": 26, "fields[0].key": 27,
			"fields[0].value": 28, "fields[0].value.static": 28}},
		{Name: "delete_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{"debug"}},
			Lines: map[string]int{"": 30, "enabled": 31, "fields": 32, "fields[0]": 32}},
	}, src.Transforms)

	sink := readConnector(t, "testdata/upstream/connectors/stdout_sink.toml")
	require.Equal(t, KindSink, sink.Type)
	require.Equal(t, "stdout", sink.PluginName())
	require.True(t, sink.Verbose)
	require.Equal(t, "stdout_printer", sink.Consumers[0].ConsumerGroup)
	require.Equal(t, 20*time.Millisecond, sink.Consumers[0].PollInterval)
	require.Equal(t, uint32(100), sink.Consumers[0].BatchLength)

	pg := readConnector(t, "testdata/upstream/connectors/postgres_sink.toml")
	require.Equal(t, "pg-archive", pg.Key)
	require.False(t, pg.Enabled)
	require.Equal(t, uint64(2), pg.Version)
	require.Equal(t, "postgres", pg.PluginName())
	require.Len(t, pg.Consumers, 2)
	require.Equal(t, SchemaAvro, pg.Consumers[0].Schema)
	abs, _ := filepath.Abs("testdata/upstream/connectors/schemas/order.avsc")
	require.Equal(t, abs, pg.Consumers[0].AvroSchemaPath, "relative to the connector file")
	require.Equal(t, []string{"created", "cancelled"}, pg.Consumers[0].Topics)
	require.Equal(t, uint32(1000), pg.Consumers[0].BatchLength)
	require.Equal(t, SchemaRaw, pg.Consumers[1].Schema)
	require.Equal(t, "iggy-connect-sink-pg-archive", pg.Consumers[1].ConsumerGroup)
	require.Equal(t, "filter_fields", pg.Transforms[0].Name)
}

func TestSchemaNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"json", "json"}, {"raw", "raw"}, {"text", "text"}, {"proto", "proto"}, {"avro", "avro"},
		{"flatbuffer", "flatbuffer"}, {"flat_buffer", "flatbuffer"}, {"JSON", "json"},
	} {
		c, err := ParseConnector("s.toml", []byte("type=\"source\"\nkey=\"k\"\n[[streams]]\nstream=\"s\"\ntopic=\"t\"\nschema=\""+tc.in+"\"\n"), noEnv)
		require.NoError(t, err, tc.in)
		require.Equal(t, Schema(tc.want), c.Producers[0].Schema, tc.in)
	}
}

// Each error class names the file, the line, the dotted key with indexes,
// and what was expected.
func TestConnectorErrors(t *testing.T) {
	t.Parallel()
	const head = "type = \"source\"\nkey = \"gen\"\n" // lines 1-2
	for i, tc := range []struct {
		src  string
		want []string
	}{
		// unknown key
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[[streams]]\nstream = \"s\"\ntopic = \"u\"\nlinger = \"5ms\"\n",
			[]string{"gen.toml:9: streams[1].linger: unknown key; did you mean \"linger_time\"?"}},
		{head + "colour = 1\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:3: colour: unknown key; allowed keys here: benchmark, enabled, key, name, path, plugin_config, plugin_config_format, streams, transforms, type, verbose, version"}},
		{head + "[config]\nx = 1\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:3: config: unknown key; use [plugin_config] (older upstream releases used [config])"}},
		{head + "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n",
			[]string{"gen.toml:5: streams[0].topics: unknown key; a source produces to one topic: use topic = \"name\"", "streams[0].topic: required key is missing; expected a string"}},
		// wrong type
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[[streams]]\nstream = \"s\"\ntopic = \"u\"\nbatch_length = \"100\"\n",
			[]string{"gen.toml:9: streams[1].batch_length: expected a non-negative integer, got the string \"100\""}},
		{head + "enabled = 1\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:3: enabled: expected true or false, got an integer (1)"}},
		{head + "[streams]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:3: streams: expected an array of tables, got a single table; write [[streams]] instead of [streams]"}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = \"t\"\n",
			[]string{"gen.toml:5: streams[0].topics: expected an array of strings, got the string \"t\"; write [\"t\"]"}},
		{head + "plugin_config = 5\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:3: plugin_config: expected a table, got an integer"}},
		// missing required
		{"key = \"k\"\n", []string{"gen.toml: type: required key is missing; expected \"source\" or \"sink\""}},
		{"type = \"sink\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n", []string{"gen.toml: key: required key is missing; expected a string"}},
		{head + "name = \"x\"\n", []string{"streams: required key is missing; expected an array of tables"}},
		{head + "[[streams]]\ntopic = \"t\"\n", []string{"gen.toml:3: streams[0].stream: required key is missing; expected a string"}},
		// bad duration
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[[streams]]\nstream = \"s\"\ntopic = \"u\"\nlinger_time = \"fast\"\n",
			[]string{"gen.toml:9: streams[1].linger_time: expected a duration such as \"5ms\", \"1s\" or \"1h 30m\", got \"fast\""}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = 5\n",
			[]string{"gen.toml:6: streams[0].poll_interval: expected a duration such as \"5ms\", \"1s\" or \"1h 30m\", got an integer (5)"}},
		// enums
		{"type = \"sinc\"\n", []string{"gen.toml:1: type: expected one of \"source\", \"sink\", got \"sinc\" (did you mean \"sink\"?)"}},
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"xml\"\n",
			[]string{"gen.toml:6: streams[0].schema: expected one of \"json\", \"raw\", \"text\", \"proto\", \"avro\", \"flatbuffer\", got \"xml\""}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\non_error = \"retry\"\n",
			[]string{"gen.toml:6: streams[0].on_error: expected one of \"stop\", \"dead_letter\", got \"retry\""}},
		// transforms
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[transforms.add_field]\nenabled = true\n",
			[]string{"gen.toml:6: transforms.add_field: unknown transform; did you mean \"add_fields\"?"}},
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[transforms.add_fields]\nenabled = \"yes\"\n",
			[]string{"gen.toml:7: transforms.add_fields.enabled: expected true or false, got the string \"yes\""}},
		// validation
		{"type = \"source\"\nkey = \"bad/key\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
			[]string{"gen.toml:2: key: expected 1 to 128 letters, digits"}},
		{head + "[[streams]]\nstream = \"\"\ntopic = \"t\"\nbatch_length = 0\n",
			[]string{"gen.toml:4: streams[0].stream: expected a non-empty string", "gen.toml:6: streams[0].batch_length: expected an integer of at least 1"}},
		{head + "streams = []\n", []string{"gen.toml:3: streams: expected at least one [[streams]] entry"}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = []\n", []string{"gen.toml:5: streams[0].topics: expected at least one topic"}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\ndead_letter_topic = \"dlq\"\n",
			[]string{"gen.toml:6: streams[0].dead_letter_topic: only used with on_error = \"dead_letter\""}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\non_error = \"dead_letter\"\ndead_letter_topic = \"t\"\n",
			[]string{"gen.toml:7: streams[0].dead_letter_topic: must differ from the topics the sink reads"}},
		{"type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nretry_backoff = \"1m\"\n",
			[]string{"streams[0].max_retry_backoff: must not be shorter than retry_backoff (1m)"}},
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"avro\"\navro_schema_json = \"{}\"\navro_schema_path = \"a.avsc\"\n",
			[]string{"gen.toml:8: streams[0].avro_schema_path: set either avro_schema_json or avro_schema_path, not both"}},
		// TOML syntax
		{head + "[[streams]\n", []string{"gen.toml:4: invalid TOML: expected end of table array name"}},
	} {
		_, err := ParseConnector("gen.toml", []byte(tc.src), noEnv)
		require.Error(t, err, "case %d", i)
		require.ErrorIs(t, err, ErrInvalid, "case %d", i)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "case %d", i)
		}
	}
}

func TestDeadLetterDefaults(t *testing.T) {
	t.Parallel()
	c, err := ParseConnector("d.toml", []byte(`
type = "sink"
key = "pg"
[[streams]]
stream = "orders"
topics = ["created"]
on_error = "dead_letter"
max_retries = 10
retry_backoff = "1s"
max_retry_backoff = "1m"
[[streams]]
stream = "orders"
topics = ["paid"]
on_error = "dead-letter"
dead_letter_stream = "errors"
dead_letter_topic = "orders_paid"
`), noEnv)
	require.NoError(t, err)
	s0, s1 := c.Consumers[0], c.Consumers[1]
	require.Equal(t, PolicyDeadLetter, s0.OnError)
	require.Equal(t, "orders", s0.DeadLetterStream)
	require.Equal(t, "pg_dead_letter", s0.DeadLetterTopic)
	require.Equal(t, uint32(10), s0.MaxRetries)
	require.Equal(t, time.Second, s0.RetryBackoff)
	require.Equal(t, time.Minute, s0.MaxRetryBackoff)
	require.Equal(t, PolicyDeadLetter, s1.OnError)
	require.Equal(t, "errors", s1.DeadLetterStream)
	require.Equal(t, "orders_paid", s1.DeadLetterTopic)
}

func TestConnectorEnvOverrides(t *testing.T) {
	t.Parallel()
	file := "testdata/upstream/connectors/postgres_sink.toml"
	for i, tc := range []struct {
		vars  map[string]string
		check func(t *testing.T, c *Connector)
	}{
		{map[string]string{"IGGY_CONNECTORS_SINK_PG-ARCHIVE_ENABLED": "true"}, func(t *testing.T, c *Connector) {
			require.True(t, c.Enabled, "upstream's form keeps the dash")
		}},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_ENABLED": "true", "IGGY_CONNECTORS_SINK_PG_ARCHIVE_NAME": "renamed"}, func(t *testing.T, c *Connector) {
			require.True(t, c.Enabled, "Ferry's form with '_'")
			require.Equal(t, "renamed", c.Name)
		}},
		{map[string]string{
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_0_CONSUMER_GROUP": "archivers",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_TOPICS":         "[settled, refunded]",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_POLL_INTERVAL":  "1s",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_BATCH_LENGTH":   "77",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_MAX_RETRIES":    "0",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_ON_ERROR":       "dead_letter",
		}, func(t *testing.T, c *Connector) {
			require.Equal(t, "archivers", c.Consumers[0].ConsumerGroup)
			require.Equal(t, []string{"settled", "refunded"}, c.Consumers[1].Topics)
			require.Equal(t, time.Second, c.Consumers[1].PollInterval)
			require.Equal(t, uint32(77), c.Consumers[1].BatchLength)
			require.Equal(t, uint32(0), c.Consumers[1].MaxRetries)
			require.Equal(t, "pg-archive_dead_letter", c.Consumers[1].DeadLetterTopic, "derived defaults follow the overrides")
		}},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_FORMAT": "yaml"}, func(t *testing.T, c *Connector) {
			require.Equal(t, FormatYAML, c.PluginConfigFormat)
			require.NotContains(t, c.PluginConfig, "format")
		}},
		// plugin_config: override keeps the file's type, inject infers one
		{map[string]string{
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_PASSWORD":   "12345",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_BATCH_SIZE": "250",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_SSL_MODE":   "require",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_POOL":       "8",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_VERIFY":     "false",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_RATIO":      "0.5",
			"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_HOSTS":      `["a", "b"]`,
		}, func(t *testing.T, c *Connector) {
			require.Equal(t, "12345", c.PluginConfig["password"], "an existing string stays a string")
			require.Equal(t, int64(250), c.PluginConfig["batch_size"])
			require.Equal(t, "require", c.PluginConfig["ssl_mode"])
			// New fields keep the variable's text beside the inferred value.
			require.Equal(t, EnvValue{Raw: "8", Inferred: int64(8)}, c.PluginConfig["pool"])
			require.Equal(t, EnvValue{Raw: "false", Inferred: false}, c.PluginConfig["verify"])
			require.Equal(t, EnvValue{Raw: "0.5", Inferred: 0.5}, c.PluginConfig["ratio"])
			require.Equal(t, EnvValue{Raw: `["a", "b"]`, Inferred: []any{"a", "b"}}, c.PluginConfig["hosts"])
			require.Equal(t, "iggy_messages", c.PluginConfig["target_table"], "untouched")
		}},
	} {
		c := readConnector(t, file, WithEnv(MapEnv(tc.vars)))
		t.Logf("case %d", i)
		tc.check(t, c)
	}

	// Overrides of existing plugin_config fields need only lookups; adding
	// fields needs the names.
	lookupOnly := EnvFunc(func(k string) (string, bool) {
		switch k {
		case "IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_TARGET_TABLE":
			return "t2", true
		case "IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_NEW_FIELD":
			return "x", true
		}
		return "", false
	}, nil)
	c := readConnector(t, file, WithEnv(lookupOnly))
	require.Equal(t, "t2", c.PluginConfig["target_table"])
	require.NotContains(t, c.PluginConfig, "new_field")

	// A source without [plugin_config] gets one from the environment.
	data := []byte("type = \"source\"\nkey = \"gen\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n")
	c, err := ParseConnector("g.toml", data, WithEnv(MapEnv(map[string]string{"IGGY_CONNECTORS_SOURCE_GEN_PLUGIN_CONFIG_API_TOKEN": "tok"})))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"api_token": "tok"}, c.PluginConfig)
}

func TestConnectorEnvErrors(t *testing.T) {
	t.Parallel()
	file := "testdata/upstream/connectors/postgres_sink.toml"
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	for i, tc := range []struct {
		vars map[string]string
		want []string
		not  string
	}{
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_ENABLED": "sure"},
			[]string{"environment variable IGGY_CONNECTORS_SINK_PG_ARCHIVE_ENABLED (enabled): expected true or false, got \"sure\""}, ""},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_POLL_INTERVAL": "often"},
			[]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_1_POLL_INTERVAL (streams[1].poll_interval): expected a duration"}, ""},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_0_SCHEMA": "yaml"},
			[]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_0_SCHEMA (streams[0].schema): expected one of"}, ""},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_2_STREAM": "x"},
			[]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_2_STREAM (streams[2]): streams has 2 entries (indexes 0 to 1)"}, ""},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_BATCH_SIZE": "lots"},
			[]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_BATCH_SIZE (plugin_config.batch_size): expected an integer (the type of the value in the file), got \"lots\""}, ""},
		{map[string]string{"IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_0_BATCH_LENGTH": "0"},
			[]string{"postgres_sink.toml", "environment variable IGGY_CONNECTORS_SINK_PG_ARCHIVE_STREAMS_0_BATCH_LENGTH (streams[0].batch_length): expected an integer of at least 1"}, ""},
	} {
		_, err := ParseConnector(file, data, WithEnv(MapEnv(tc.vars)))
		require.Error(t, err, "case %d", i)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "case %d", i)
		}
	}
}

// sameLines gives c the lines of orig, which a rendering does not keep.
func sameLines(c, orig *Connector) {
	c.PluginConfigLines = orig.PluginConfigLines
	for i := range c.Transforms {
		c.Transforms[i].Lines = orig.Transforms[i].Lines
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, file := range []string{
		"testdata/upstream/connectors/random_source.toml",
		"testdata/upstream/connectors/stdout_sink.toml",
		"testdata/upstream/connectors/postgres_sink.toml",
	} {
		orig := readConnector(t, file)
		orig.File = ""

		data, err := orig.MarshalTOML()
		require.NoError(t, err, file)
		back, err := ParseConnector(file, data, noEnv)
		require.NoError(t, err, "%s:\n%s", file, data)
		require.NotEmpty(t, back.PluginConfigLines, "lines of the rendering")
		sameLines(back, orig)
		require.Equal(t, orig, back, "TOML round trip of %s:\n%s", file, data)

		js, err := orig.MarshalJSON()
		require.NoError(t, err, file)
		back, err = DecodeConnectorJSON("json", orig.Type, "", js, noEnv)
		require.NoError(t, err, "%s: %s", file, js)
		require.Nil(t, back.PluginConfigLines, "JSON has no lines")
		sameLines(back, orig)
		require.Equal(t, orig, back, "JSON round trip of %s: %s", file, js)
	}

	// A source's delivery keys survive both renderings (API-created
	// versions are stored as TOML).
	src, err := ParseConnector("s.toml", []byte(`
type = "source"
key = "s"
path = "random"
[[streams]]
stream = "a"
topic = "b"
on_error = "stop"
[[streams]]
stream = "a"
topic = "c"
dead_letter_stream = "dl"
dead_letter_topic = "bad"
`), noEnv)
	require.NoError(t, err)
	src.File = ""
	data, err := src.MarshalTOML()
	require.NoError(t, err)
	back, err := ParseConnector("s.toml", data, noEnv)
	require.NoError(t, err, "%s", data)
	require.Equal(t, src, back, "TOML round trip:\n%s", data)
	require.Equal(t, PolicyStop, back.Producers[0].OnError)
	js, err := src.MarshalJSON()
	require.NoError(t, err)
	back, err = DecodeConnectorJSON("json", KindSource, "", js, noEnv)
	require.NoError(t, err, "%s", js)
	require.Equal(t, src, back, "JSON round trip: %s", js)
}

func TestDecodeConnectorJSONErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		kind Kind
		key  string
		body string
		want string
	}{
		{KindSink, "k", `{"key":"k","streams":[{"stream":"s","topics":["t"],"schema":"json","batch_length":-1}]}`,
			"request body: streams[0].batch_length: -1 is out of range"},
		{KindSink, "k", `{"key":"other","streams":[{"stream":"s","topics":["t"]}]}`,
			`request body: key: expected "k" (the key it is listed under), got "other"`},
		{KindSource, "k", `{"type":"sink","streams":[]}`, `request body: type: expected "source" here, got "sink"`},
		{KindSink, "k", `[1]`, "request body: expected a JSON object, got an array"},
		{KindSink, "k", `{"key":`, "request body: invalid JSON"},
		{KindSink, "k", `{"key":"k","enabled":"yes","streams":[{"stream":"s","topics":["t"]}]}`,
			`request body: enabled: expected true or false, got the string "yes"`},
	} {
		_, err := DecodeConnectorJSON("request body", tc.kind, tc.key, []byte(tc.body), noEnv)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	// upstream's shape with explicit nulls
	c, err := DecodeConnectorJSON("body", KindSink, "events", []byte(`{"key":"events","enabled":true,"version":0,"name":"n","path":"p",
		"transforms":null,"streams":[{"stream":"events","topics":["gateway"],"schema":"json","avro_schema_json":null,
		"avro_schema_path":null,"batch_length":1000,"poll_interval":"250ms","consumer_group":"events"}],
		"plugin_config_format":"json","plugin_config":{"url":"http://clickhouse:8123"},"verbose":false,"benchmark":false}`), noEnv)
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, c.Consumers[0].PollInterval)
	require.Equal(t, "http://clickhouse:8123", c.PluginConfig["url"])
}

func TestPluginName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind       Kind
		path, want string
	}{
		{KindSource, "target/release/libiggy_connector_random_source", "random"},
		{KindSource, "/usr/lib/libiggy_connector_random_source.so", "random"},
		{KindSink, "libiggy_connector_postgres_sink.dylib", "postgres"},
		{KindSink, "stdout", "stdout"},
		{KindSink, "plugins/my_sink", "my"},
	} {
		c := Connector{Type: tc.kind, Path: tc.path}
		require.Equal(t, tc.want, c.PluginName(), tc.path)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 5 * time.Millisecond: "5ms", time.Second: "1s", 90 * time.Minute: "1h 30m",
		1500 * time.Millisecond: "1s 500ms", 36 * time.Hour: "36h", 1500 * time.Nanosecond: "1us 500ns",
	} {
		require.Equal(t, want, FormatDuration(d))
	}
	require.True(t, strings.HasPrefix(FormatDuration(-time.Second), "-"))
}
