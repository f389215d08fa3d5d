package broker_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// dial connects a raw client that is closed at the end of the test.
func dial(t testing.TB, b *broker.Broker) *rawclient.Client {
	t.Helper()
	c, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// login dials and logs in as root.
func login(t testing.TB, b *broker.Broker) *rawclient.Client {
	t.Helper()
	c := dial(t, b)
	rep, err := c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.Nil(t, rep.Eviction, "login evicted")
	require.NotZero(t, c.Session)
	return c
}

func start(t testing.TB, opts ...brokertest.Option) (*broker.Broker, *rawclient.Client) {
	b := brokertest.Start(t, opts...)
	return b, login(t, b)
}

func bodyOf(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return x
	case wire.Encodable:
		return x.AppendTo(nil)
	}
	// A payload passed by value: encode a pointer to a copy.
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	if e, ok := p.Interface().(wire.Encodable); ok {
		return e.AppendTo(nil)
	}
	panic(fmt.Sprintf("bodyOf: %T is not a payload", v))
}

// do sends cmd and requires a reply frame (not an eviction) echoing the
// request id and operation.
func do(t testing.TB, c *rawclient.Client, cmd wire.Command, body any) *rawclient.Reply {
	t.Helper()
	h := c.Header(cmd)
	rep, err := c.Exchange(h, bodyOf(body))
	require.NoError(t, err, "command %s", cmd)
	require.Nil(t, rep.Eviction, "command %s evicted: %+v", cmd, rep.Eviction)
	require.Equal(t, h.Request, rep.Header.Request, "request id echo for %s", cmd)
	wantOp := h.Operation
	if cmd == wire.CmdDeleteSegments {
		wantOp = wire.OpTruncatePartition // resolved to a TruncatePartition
	}
	require.Equal(t, wantOp, rep.Header.Operation, "operation echo for %s", cmd)
	return rep
}

// ok requires success and returns the payload (result section stripped
// where the operation has one).
func ok(t testing.TB, rep *rawclient.Reply) []byte {
	t.Helper()
	require.Zero(t, rep.Status(), "status")
	if rep.Header.Operation.ResultFramed() {
		payload, code, err := rep.Result()
		require.NoError(t, err)
		require.Zero(t, code, "committed rejection %d", code)
		return payload
	}
	return rep.Body
}

// committed requires a committed rejection with code.
func committed(t testing.TB, rep *rawclient.Reply, code wire.Code) {
	t.Helper()
	require.Zero(t, rep.Status(), "status")
	_, got, err := rep.Result()
	require.NoError(t, err)
	require.Equal(t, code, got, "result code")
	require.Len(t, rep.Body, 12)
}

// denied requires a pre-commit denial: status code, empty body.
func denied(t testing.TB, rep *rawclient.Reply, code wire.Code) {
	t.Helper()
	require.Equal(t, code, rep.Status(), "status")
	require.Empty(t, rep.Body)
}

func decodeAs[T any, P interface {
	*T
	wire.Decodable
}](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, wire.Unmarshal(b, P(&v)))
	return v
}

func createStream(t testing.TB, c *rawclient.Client, name string) wire.StreamDetails {
	t.Helper()
	rep := do(t, c, wire.CmdCreateStream, &wire.CreateStream{Name: name})
	return decodeAs[wire.StreamDetails](t, ok(t, rep))
}

func optionsBlock(entries ...wire.Entry) []byte { return wire.AppendTLV(nil, entries) }

func createTopic(t testing.TB, c *rawclient.Client, stream wire.Identifier, name string, parts uint32, opts ...wire.Entry) wire.TopicDetails {
	t.Helper()
	rep := do(t, c, wire.CmdCreateTopic, &wire.CreateTopic{Stream: stream, PartitionsCount: parts, Name: name, Options: optionsBlock(opts...)})
	return decodeAs[wire.TopicDetails](t, ok(t, rep))
}

// setup creates stream "s" and topic "t" with parts partitions.
func setup(t testing.TB, c *rawclient.Client, parts uint32) (wire.Identifier, wire.Identifier) {
	t.Helper()
	s := createStream(t, c, "s")
	tp := createTopic(t, c, wire.NumericID(s.ID), "t", parts)
	return wire.NumericID(s.ID), wire.NumericID(tp.ID)
}

func messages(payloads ...string) []wire.Message {
	out := make([]wire.Message, len(payloads))
	for i, p := range payloads {
		out[i] = wire.Message{ID: [16]byte{byte(i + 1)}, OriginTimestamp: uint64(1_700_000_000_000_000 + i), Payload: []byte(p)}
	}
	return out
}

func numbered(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, from+i)
	}
	return out
}

func sendBody(t testing.TB, stream, topic wire.Identifier, p wire.Partitioning, payloads ...string) []byte {
	t.Helper()
	body, err := wire.AppendSendMessages(nil, stream, topic, p, messages(payloads...))
	require.NoError(t, err)
	return body
}

// send sends payloads and returns the one confirmation.
func send(t testing.TB, c *rawclient.Client, stream, topic wire.Identifier, p wire.Partitioning, payloads ...string) wire.SendConfirmation {
	t.Helper()
	rep := do(t, c, wire.CmdSendMessages, sendBody(t, stream, topic, p, payloads...))
	conf := decodeAs[wire.SendReply](t, ok(t, rep))
	require.Len(t, conf, 1)
	return conf[0]
}

func poll(t testing.TB, c *rawclient.Client, req wire.PollMessages) wire.PollReply {
	t.Helper()
	rep := do(t, c, wire.CmdPollMessages, &req)
	return decodeAs[wire.PollReply](t, ok(t, rep))
}

func payloads(r wire.PollReply) []string {
	out := []string{}
	for _, m := range r.Messages {
		out = append(out, string(m.Payload))
	}
	return out
}

func offsetsOf(r wire.PollReply) []uint64 {
	out := []uint64{}
	for _, m := range r.Messages {
		out = append(out, m.Offset)
	}
	return out
}

func single(id uint32) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(id)}
}

func groupConsumer(id uint32) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerGroup, ID: wire.NumericID(id)}
}

func getTopic(t testing.TB, c *rawclient.Client, stream, topic wire.Identifier) wire.TopicDetails {
	t.Helper()
	body := ok(t, do(t, c, wire.CmdGetTopic, &wire.TopicRef{Stream: stream, Topic: topic}))
	require.NotEmpty(t, body, "topic not found")
	return decodeAs[wire.TopicDetails](t, body)
}
