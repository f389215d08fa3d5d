package broker

import (
	"context"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// A group poll holds the group's lock across a disk read. The janitor must
// not wait for that lock while holding the model's read lock: a metadata
// change queued for the write lock would then stall every send and poll.
func TestJanitorDoesNotStallTheBrokerBehindABusyGroup(t *testing.T) {
	t.Parallel()
	b, c := startInternal(t, Config{HeartbeatInterval: 50 * time.Millisecond, RebalancingTimeout: 50 * time.Millisecond})
	mustOK(t, c, wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "s"}))
	for _, name := range []string{"t", "u"} {
		mustOK(t, c, wire.CmdCreateTopic, wire.Marshal(&wire.CreateTopic{Stream: wire.NumericID(0), PartitionsCount: 1, Name: name}))
	}
	mustOK(t, c, wire.CmdCreateConsumerGroup, wire.Marshal(&wire.CreateConsumerGroup{Stream: wire.NumericID(0), Topic: wire.NumericID(0), Name: "g"}))
	b.mu.RLock()
	g := b.streams[0].topics[0].groups[0]
	b.mu.RUnlock()

	g.mu.Lock() // as a group poll reading from disk does
	locked := true
	defer func() {
		if locked {
			g.mu.Unlock()
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the janitor run into the busy group

	admin, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Login("iggy", "iggy")
	require.NoError(t, err)
	created := make(chan error, 1)
	go func() {
		_, err := admin.Do(wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "x"}))
		created <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the metadata change queue for the model's lock

	body, err := wire.AppendSendMessages(nil, wire.NumericID(0), wire.NumericID(1), wire.ToPartition(0),
		[]wire.Message{{Payload: []byte("m")}})
	require.NoError(t, err)
	rep, err := c.Do(wire.CmdSendMessages, body) // fails after rawclient.Timeout if stalled
	require.NoError(t, err, "a send to another topic stalls while a group is busy")
	require.Zero(t, rep.Status())

	g.mu.Unlock()
	locked = false
	require.NoError(t, <-created)
}
