package stdout_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/stdout"
	"github.com/stretchr/testify/require"
)

func TestPrintsOneLinePerMessage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := stdout.NewWriter(&out, true)
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Partition: 1, Messages: []connector.Message{
		{Stream: "s", Topic: "t", Partition: 1, Offset: 7, Payload: []byte(`{"a":1}`)},
		{Stream: "s", Topic: "t", Partition: 1, Offset: 8, Payload: []byte{0xff, 0x00}},
	}}
	require.NoError(t, s.Consume(context.Background(), b))
	require.Equal(t, "s/t partition 1 offset 7 {\"a\":1}\ns/t partition 1 offset 8 0xff00\n", out.String())

	out.Reset()
	require.NoError(t, stdout.NewWriter(&out, false).Consume(context.Background(), b))
	require.Equal(t, "s/t partition 1 offset 7\ns/t partition 1 offset 8\n", out.String())
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := stdout.New(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"print_payload": "yes"}}})
	require.ErrorContains(t, err, "print_payload")
	_, err = stdout.New(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"print_payload": true}}})
	require.NoError(t, err)
}
