package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
)

// The errors a new user meets first name the thing that is wrong.
func TestErrorsNameTheThing(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	_, err := ferry(t, "", "stream", "create", "hooks", addr)
	require.NoError(t, err)
	_, err = ferry(t, "", "topic", "create", "hooks", "my-topic", "2", "none", addr)
	require.NoError(t, err)

	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"message", "send", "nostream", "my-topic", "x"},
			`stream "nostream" not found on ` + b.Addr() + " (`ferry stream list` shows the streams, `ferry stream create nostream` creates it)"},
		{[]string{"message", "send", "hooks", "notopic", "x"},
			`topic "notopic" not found in stream "hooks" (` + "`ferry topic list hooks` shows its topics"},
		{[]string{"message", "send", "hooks", "my-topic", "x", "--partition", "5"},
			"partition 5 not found: topic hooks/my-topic has 2 partition(s), numbered 0 to 1"},
		{[]string{"message", "poll", "hooks", "my-topic", "2"},
			"partition 2 not found: topic hooks/my-topic has 2 partition(s), numbered 0 to 1"},
		{[]string{"message", "poll", "nostream", "my-topic", "0"}, `stream "nostream" not found on `},
		{[]string{"message", "send", "hooks", "my-topic", "x", "--password", "wrong"},
			`the Iggy server at ` + b.Addr() + ` refused the login of "iggy": wrong username or password`},
		{[]string{"message", "send", "hooks", "my-topic", "x", "--address", "iggy://someone:sekrit@" + b.Addr()},
			`the Iggy server at ` + b.Addr() + ` refused the login of "someone": wrong username or password`},
		{[]string{"message", "send", "hooks", "my-topic", "x", "--address", "127.0.0.1:1"},
			"cannot reach an Iggy server at 127.0.0.1:1 (is `ferry run` or `ferry serve` running there?"},
	} {
		args := tc.args
		if args[len(args)-2] != "--address" {
			args = append(args, addr)
		}
		_, err := ferry(t, "", args...)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.want, "case %d", i)
		require.NotContains(t, err.Error(), "sekrit", "case %d", i)
		require.Equal(t, 1, exitCode(err), "case %d", i)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := ferry(t, "", "version")
	require.NoError(t, err)
	require.Regexp(t, `^ferry \S+ \(commit .+; go1\.\d+`, out)
	flag, err := ferry(t, "", "--version")
	require.NoError(t, err)
	require.Equal(t, out, flag, "--version prints the same line")
}
