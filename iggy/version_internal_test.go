package iggy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy/wire"
)

func TestIncompatibleProtocolNamesBothVersions(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newer := optionFunc(func(c *config) { c.protocolVersion = wire.PackVersion(0, 12, 0) })
	_, err := Dial(ctx, "iggy://iggy:iggy@"+b.Addr(), newer)
	require.ErrorIs(t, err, ErrIncompatibleProtocol)
	var ev *wire.EvictionError
	require.ErrorAs(t, err, &ev)
	require.Equal(t, wire.EvictIncompatibleProtocol, ev.Reason)
	require.ErrorContains(t, err, "the server accepts 0.11.0..0.11.0")
	require.ErrorContains(t, err, "this client speaks 0.12.0")
	require.True(t, permanentLogin(err), "never retried")
	require.False(t, IsRetriable(err))
	require.False(t, errors.Is(err, ErrConnection))
}
