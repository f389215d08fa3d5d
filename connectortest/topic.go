package connectortest

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/iggy"
)

// Messages reads the first 10,000 messages of stream/topic, partition 0,
// of the runtime's broker (as the root user); none when the topic does
// not exist yet. For dead-letter topics and other small topics a test
// checks.
func (r *Runtime) Messages(t testing.TB, stream, topic string) []iggy.Message {
	t.Helper()
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, r.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatalf("connect to the runtime's broker: %v", err)
	}
	defer admin.Close()
	reply, err := admin.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10000,
	})
	if err != nil {
		return nil
	}
	return reply.Messages
}
