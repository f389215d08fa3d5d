package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func addSeeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(pattern)
	require.NoError(f, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
}

// FuzzParseConnector: arbitrary bytes never panic the connector-file
// loader, and whatever it accepts survives a TOML round trip unchanged.
func FuzzParseConnector(f *testing.F) {
	addSeeds(f, "testdata/upstream/connectors/*.toml")
	addSeeds(f, "../examples/quickstart/connectors/*.toml")
	f.Add([]byte("type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\non_error = \"dead_letter\"\n"))
	f.Add([]byte("type = \"source\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n[transforms.add_fields]\nx = 1979-05-27\n"))
	f.Add([]byte("type = 5\n"))
	env := WithEnv(MapEnv(map[string]string{"IGGY_CONNECTORS_SINK_K_STREAMS_0_BATCH_LENGTH": "7", "IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_X": "[1, a]"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConnector("fuzz.toml", data, env)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		out, err := c.MarshalTOML()
		require.NoError(t, err)
		back, err := ParseConnector("fuzz.toml", out, noEnv)
		require.NoError(t, err, "re-reading:\n%s", out)
		c.File, back.File = "", ""
		require.Equal(t, c.String(), back.String(), "round trip of:\n%s", out)
	})
}

// FuzzDecodeConnectorJSON: arbitrary bytes never panic the JSON decoder.
func FuzzDecodeConnectorJSON(f *testing.F) {
	for _, file := range []string{"testdata/upstream/connectors/postgres_sink.toml", "testdata/upstream/connectors/stdout_sink.toml"} {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		c, err := ParseConnector(file, data, noEnv)
		require.NoError(f, err)
		js, err := c.MarshalJSON()
		require.NoError(f, err)
		f.Add(js)
	}
	f.Add([]byte(`{"key":"k","streams":[{"stream":"s","topics":["t"],"batch_length":1e400}]}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeConnectorJSON("fuzz", KindSink, "k", data, noEnv)
	})
}

// FuzzParseRuntime: arbitrary bytes never panic the runtime loader.
func FuzzParseRuntime(f *testing.F) {
	addSeeds(f, "testdata/upstream/*.toml")
	addSeeds(f, "../examples/quickstart/config.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse("fuzz.toml", data, noEnv)
	})
}

// FuzzParseDotenv: arbitrary bytes never panic the .env parser, and every
// key it returns is a valid variable name.
func FuzzParseDotenv(f *testing.F) {
	f.Add([]byte("A=1\nexport B='x'\nC=\"multi\nline\" # c\n# comment\n"))
	f.Add([]byte("A=\"unterminated"))
	f.Add([]byte("A=\"\\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseDotenv("fuzz.env", data)
		if err != nil {
			return
		}
		for k := range vars {
			require.NotEmpty(t, k)
			for i := 0; i < len(k); i++ {
				require.True(t, isEnvKeyByte(k[i], i), "key %q", k)
			}
		}
	})
}
