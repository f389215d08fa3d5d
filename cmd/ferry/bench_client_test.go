package main

import (
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/stretchr/testify/require"
)

func TestBenchClientAgainstAServerAndEmbedded(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	out, err := ferry(t, "", "bench", "client", "--address", b.Addr(), "--messages", "3000", "--batch", "500", "--size", "256",
		"--partitions", "2", "--consumers", "2", "--poll", "group")
	require.NoError(t, err, out)
	require.Contains(t, out, "client: 3000 messages of 256 bytes, batches of 500, 2 partitions, 1 producers, 2 consumers (poll by group), against "+b.Addr())
	require.Regexp(t, `send .* messages/s .* MB/s .* CPU-µs/msg  \(3000 messages in `, out)
	require.Regexp(t, `poll .* messages/s .* MB/s .* CPU-µs/msg  \(3000 messages in `, out)

	out, err = ferry(t, "", "bench", "client", "--messages", "2000", "--mode", "send")
	require.NoError(t, err, out)
	require.Contains(t, out, "against an embedded broker in this process")
	require.Contains(t, out, "(2000 messages in ")
	require.NotContains(t, out, "\npoll ")

	_, err = ferry(t, "", "bench", "client", "--poll", "sideways")
	require.ErrorContains(t, err, `poll is "sideways"`)
}
