package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A source's [[streams]] takes a sink's on_error and dead-letter keys,
// with "dead_letter" as the default.
func TestSourceDeadLetterKeys(t *testing.T) {
	t.Parallel()
	c, err := ParseConnector("files.toml", []byte(`
type = "source"
key = "files"
[[streams]]
stream = "logs"
topic = "parsed"
[[streams]]
stream = "logs"
topic = "strict"
on_error = "stop"
[[streams]]
stream = "logs"
topic = "other"
on_error = "dlq"
dead_letter_stream = "errors"
dead_letter_topic = "other_failed"
`), noEnv)
	require.NoError(t, err)
	for i, want := range []struct {
		stream, topic string
		ok            bool
	}{
		{"logs", "files_dead_letter", true},
		{"", "", false},
		{"errors", "other_failed", true},
	} {
		stream, topic, ok := c.Producers[i].DeadLetterTarget(c.Key)
		require.Equal(t, want.ok, ok, "streams[%d]", i)
		require.Equal(t, want.stream, stream, "streams[%d]", i)
		require.Equal(t, want.topic, topic, "streams[%d]", i)
	}
	require.Equal(t, ErrorPolicy(""), c.Producers[0].OnError, "unset keys stay unset: the file reads back as upstream's shape")
	require.Equal(t, PolicyStop, c.Producers[1].OnError)
	require.Equal(t, PolicyDeadLetter, c.Producers[2].OnError, "the sink's aliases work here too")
}

func TestSourceDeadLetterKeyErrors(t *testing.T) {
	t.Parallel()
	const head = "type = \"source\"\nkey = \"gen\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n" // lines 1-5
	for i, tc := range []struct{ src, want string }{
		{head + "on_error = \"skip\"\n",
			`gen.toml:6: streams[0].on_error: expected one of "stop", "dead_letter", got "skip"`},
		{head + "on_error = \"dead_leter\"\n",
			`gen.toml:6: streams[0].on_error: expected one of "stop", "dead_letter", got "dead_leter" (did you mean "dead_letter"?)`},
		{head + "on_error = 1\n", `gen.toml:6: streams[0].on_error: expected one of "stop", "dead_letter", got an integer (1)`},
		{head + "on_error = \"stop\"\ndead_letter_topic = \"dlq\"\n",
			`gen.toml:7: streams[0].dead_letter_topic: only used with on_error = "dead_letter"`},
		{head + "dead_letter_topic = \"t\"\n",
			"gen.toml:6: streams[0].dead_letter_topic: must differ from the topics the source produces to (s/t)"},
		{head + "[[streams]]\nstream = \"s\"\ntopic = \"u\"\ndead_letter_topic = \"t\"\n",
			"gen.toml:9: streams[1].dead_letter_topic: must differ from the topics the source produces to (s/t)"},
		{head + "dead_letter_topics = \"dlq\"\n", `gen.toml:6: streams[0].dead_letter_topics: unknown key; did you mean "dead_letter_topic"?`},
		{head + "max_retries = 3\n", "gen.toml:6: streams[0].max_retries: unknown key; max_retries is a sink key; a source retries a failed send until it succeeds"},
	} {
		_, err := ParseConnector("gen.toml", []byte(tc.src), noEnv)
		require.ErrorIs(t, err, ErrInvalid, "case %d", i)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func TestSourceDeadLetterEnvOverrides(t *testing.T) {
	t.Parallel()
	data := []byte("type = \"source\"\nkey = \"files\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n")
	c, err := ParseConnector("f.toml", data, WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_ON_ERROR": "stop",
	})))
	require.NoError(t, err)
	_, _, ok := c.Producers[0].DeadLetterTarget(c.Key)
	require.False(t, ok)

	c, err = ParseConnector("f.toml", data, WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_DEAD_LETTER_STREAM": "errors",
		"IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_DEAD_LETTER_TOPIC":  "files_failed",
	})))
	require.NoError(t, err)
	stream, topic, ok := c.Producers[0].DeadLetterTarget(c.Key)
	require.True(t, ok)
	require.Equal(t, "errors", stream)
	require.Equal(t, "files_failed", topic)

	for i, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_ON_ERROR": "ignore"},
			`f.toml: environment variable IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_ON_ERROR (streams[0].on_error): expected one of "stop", "dead_letter", got "ignore"`},
		{map[string]string{"IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_ON_ERROR": "stop", "IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_DEAD_LETTER_TOPIC": "x"},
			`IGGY_CONNECTORS_SOURCE_FILES_STREAMS_0_DEAD_LETTER_TOPIC (streams[0].dead_letter_topic): only used with on_error = "dead_letter"`},
	} {
		_, err := ParseConnector("f.toml", data, WithEnv(MapEnv(tc.vars)))
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}
