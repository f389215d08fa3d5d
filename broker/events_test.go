package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/stretchr/testify/require"
)

// eventsBroker starts a broker with events on, a quick retention sweep
// and a short offset window.
func eventsBroker(t *testing.T, opts ...brokertest.Option) (*broker.Broker, *iggy.Client) {
	t.Helper()
	opts = append([]brokertest.Option{brokertest.Config(func(c *broker.Config) {
		c.Events = broker.Events{Enabled: true, OffsetWindow: 50 * time.Millisecond}
		c.RetentionInterval = 50 * time.Millisecond
	})}, opts...)
	b := brokertest.Start(t, opts...)
	return b, client(t, b.Addr(), "iggy", "iggy")
}

func client(t *testing.T, addr, user, pass string) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, addr, iggy.WithCredentials(user, pass), iggy.WithoutReconnect())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// ceAttr is CloudEvents' rule for attribute names: lower-case letters and
// digits, at most 20 of them.
var ceAttr = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// checkCloudEvent is an independent check of the CloudEvents 1.0 JSON
// format (spec sections 2-3 and the JSON format): required attributes
// present, non-empty strings, source a URI-reference, time RFC 3339,
// data an object under datacontenttype application/json, attribute
// names well formed. It does not use package sysevents.
func checkCloudEvent(t *testing.T, payload []byte, wantType string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(payload, &m), "%s", payload)
	for _, attr := range []string{"specversion", "id", "source", "type"} {
		v, ok := m[attr].(string)
		require.True(t, ok && v != "", "required attribute %q in %s", attr, payload)
	}
	require.Equal(t, "1.0", m["specversion"])
	require.Equal(t, wantType, m["type"])
	_, err := url.Parse(m["source"].(string))
	require.NoError(t, err, "source is a URI-reference")
	ts, ok := m["time"].(string)
	require.True(t, ok, "time in %s", payload)
	_, err = time.Parse(time.RFC3339Nano, ts)
	require.NoError(t, err)
	require.Equal(t, "application/json", m["datacontenttype"])
	_, isObject := m["data"].(map[string]any)
	require.True(t, isObject, "data is a JSON object in %s", payload)
	for k := range m {
		require.Regexp(t, ceAttr, k)
	}
	return m
}

// events reads the events of typ from the system stream.
func events(t *testing.T, c *iggy.Client, typ sysevents.Type) []iggy.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(7)),
		Stream: iggy.NamedID(sysevents.Stream), Topic: iggy.NamedID(typ.Topic()),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10000})
	if errors.Is(err, iggy.ErrStreamNotFound) || errors.Is(err, iggy.ErrTopicNotFound) {
		return nil // published asynchronously: the system stream may not be back yet
	}
	require.NoError(t, err)
	return r.Messages
}

// waitEvent waits for an event of typ whose data matches and returns it
// checked against the envelope rules and sysevents.Decode.
func waitEvent(t *testing.T, c *iggy.Client, typ sysevents.Type, match func(data map[string]any) bool) sysevents.Event {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, m := range events(t, c, typ) {
			ce := checkCloudEvent(t, m.Payload, string(typ))
			if !match(ce["data"].(map[string]any)) {
				continue
			}
			v, ok := header.Get(m.Headers, sysevents.HeaderType)
			require.True(t, ok, "ce_type header")
			require.Equal(t, string(typ), string(v.Data))
			ev, err := sysevents.Decode(m.Payload)
			require.NoError(t, err)
			id, err := sysevents.ParseID(ev.ID)
			require.NoError(t, err)
			require.Equal(t, id, m.ID, "the message id is the event id")
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for a %s event", typ)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func field(k string, v any) func(map[string]any) bool {
	return func(d map[string]any) bool {
		if f, ok := v.(int); ok {
			return d[k] == float64(f)
		}
		return d[k] == v
	}
}

func TestEventsEveryBrokerType(t *testing.T) {
	t.Parallel()
	b, c := eventsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.CreateStream(ctx, "orders")
	require.NoError(t, err)
	require.Zero(t, s.ID, "the system stream leaves user stream ids as they were")
	sid := iggy.NamedID("orders")
	require.NoError(t, c.UpdateStream(ctx, sid, "orders2"))
	sid = iggy.NamedID("orders2")
	_, err = c.CreateTopic(ctx, sid, "t", 1)
	require.NoError(t, err)
	tid := iggy.NamedID("t")
	require.NoError(t, c.UpdateTopic(ctx, sid, tid, "t", iggy.TopicMessageExpiry(time.Hour)))
	_, err = c.SendMessages(ctx, sid, tid, iggy.ToPartition(0), []iggy.Message{{Payload: []byte("a")}, {Payload: []byte("b")}})
	require.NoError(t, err)
	_, err = c.CreateConsumerGroup(ctx, sid, tid, "g")
	require.NoError(t, err)
	gid := iggy.NamedID("g")
	require.NoError(t, c.JoinConsumerGroup(ctx, sid, tid, gid))
	require.NoError(t, c.StoreConsumerOffset(ctx, iggy.ConsumerGroup(gid), sid, tid, iggy.Partition(0), 1))
	require.NoError(t, c.LeaveConsumerGroup(ctx, sid, tid, gid))
	require.NoError(t, c.PurgeTopic(ctx, sid, tid))
	require.NoError(t, c.PurgeStream(ctx, sid))
	require.NoError(t, c.DeleteTopic(ctx, sid, tid))
	require.NoError(t, c.DeleteStream(ctx, sid))
	other := client(t, b.Addr(), "iggy", "iggy")
	require.NoError(t, other.Close())
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "wrong-password"), iggy.WithoutReconnect())
	require.Error(t, err)

	cases := []struct {
		typ   sysevents.Type
		match func(map[string]any) bool
	}{
		{sysevents.StreamCreated, field("stream", "orders")},
		{sysevents.StreamUpdated, field("previous_name", "orders")},
		{sysevents.StreamPurged, field("stream", "orders2")},
		{sysevents.StreamDeleted, field("stream", "orders2")},
		{sysevents.TopicCreated, field("topic", "t")},
		{sysevents.TopicUpdated, field("message_expiry_us", int(time.Hour/time.Microsecond))},
		{sysevents.TopicPurged, field("topic", "t")},
		{sysevents.TopicDeleted, field("topic", "t")},
		{sysevents.GroupJoined, field("group", "g")},
		{sysevents.GroupRebalanced, field("reason", sysevents.ReasonJoined)},
		{sysevents.GroupLeft, field("reason", sysevents.ReasonLeft)},
		{sysevents.OffsetStored, field("offset", 1)},
		{sysevents.ClientConnected, field("user_id", 0)},
		{sysevents.ClientDisconnected, field("reason", sysevents.ReasonClosed)},
		{sysevents.LoginFailed, field("username", "iggy")},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ), func(t *testing.T) {
			ev := waitEvent(t, c, tc.typ, tc.match)
			require.Equal(t, sysevents.SourceBroker, ev.Source)
			require.NotEmpty(t, ev.Subject)
		})
	}
	// segment.deleted and segment.compacted have tests of their own; the catalog's broker types
	// are all covered.
	covered := map[sysevents.Type]bool{sysevents.SegmentDeleted: true, sysevents.SegmentCompacted: true} // compact_test.go
	for _, tc := range cases {
		covered[tc.typ] = true
	}
	for _, typ := range sysevents.TypesOf(sysevents.OriginBroker) {
		require.True(t, covered[typ], "%s has a case", typ)
	}
	for _, m := range events(t, c, sysevents.LoginFailed) {
		require.NotContains(t, string(m.Payload), "wrong-password", "a failed login's event never holds the password")
	}
}

func TestEventsSegmentDeletedByRetention(t *testing.T) {
	t.Parallel()
	_, c := eventsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	sid, tid := iggy.NamedID("s"), iggy.NamedID("expiring")
	_, err = c.CreateTopic(ctx, sid, "expiring", 1, iggy.TopicSegmentSize(1<<20), iggy.TopicMessageExpiry(time.Second))
	require.NoError(t, err)
	payload := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 24; i++ { // 1.5 MiB: the first segment is sealed
		_, err := c.SendMessages(ctx, sid, tid, iggy.ToPartition(0), []iggy.Message{{Payload: payload}})
		require.NoError(t, err)
	}
	ev := waitEvent(t, c, sysevents.SegmentDeleted, field("topic", "expiring"))
	var d sysevents.SegmentData
	require.NoError(t, ev.DecodeData(&d))
	require.Equal(t, "s", d.Stream)
	require.Equal(t, sysevents.ReasonExpiry, d.Reason)
	require.Zero(t, d.FirstOffset)
	require.GreaterOrEqual(t, d.LastOffset, uint64(14), "a 1 MiB segment holds 15 or 16 of the 64 KiB messages")
	require.Equal(t, d.LastOffset-d.FirstOffset+1, d.Messages)
	require.Equal(t, "streams/s/topics/expiring/partitions/0", ev.Subject)

	r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: sid, Topic: tid,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1})
	require.NoError(t, err)
	require.Equal(t, d.LastOffset+1, r.Messages[0].Offset, "the event's range is what retention deleted")
}

// TestEventsNoRecursion: a consumer of the system stream (a trigger)
// joins a group and stores offsets there; none of it makes events, nor
// do topics added to the system stream.
func TestEventsNoRecursion(t *testing.T) {
	t.Parallel()
	_, c := eventsBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys := iggy.NamedID(sysevents.Stream)
	topic := iggy.NamedID(sysevents.ClientConnected.Topic())
	_, err := c.CreateTopic(ctx, sys, "hook-x_dead_letter", 1)
	require.NoError(t, err)
	_, err = c.CreateConsumerGroup(ctx, sys, topic, "trigger")
	require.NoError(t, err)
	require.NoError(t, c.JoinConsumerGroup(ctx, sys, topic, iggy.NamedID("trigger")))
	waitEvent(t, c, sysevents.ClientConnected, field("user_id", 0))
	for i := uint64(0); i < 3; i++ {
		require.NoError(t, c.StoreConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID("trigger")), sys, topic, iggy.Partition(0), 0))
	}
	require.NoError(t, c.StoreConsumerOffset(ctx, iggy.SingleConsumer(iggy.NumericID(3)), sys, topic, iggy.Partition(0), 0))
	require.NoError(t, c.LeaveConsumerGroup(ctx, sys, topic, iggy.NamedID("trigger")))
	// Markers after everything above: once they are published, so would
	// the events above have been (one publisher in queue order; offsets
	// stored earlier are flushed in the same window or an earlier one).
	_, err = c.CreateStream(ctx, "marker")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("marker"), "m", 1)
	require.NoError(t, err)
	_, err = c.SendMessages(ctx, iggy.NamedID("marker"), iggy.NamedID("m"), iggy.ToPartition(0), []iggy.Message{{Payload: []byte("x")}})
	require.NoError(t, err)
	require.NoError(t, c.StoreConsumerOffset(ctx, iggy.SingleConsumer(iggy.NumericID(3)), iggy.NamedID("marker"), iggy.NamedID("m"), iggy.Partition(0), 0))
	waitEvent(t, c, sysevents.TopicCreated, field("topic", "m"))
	waitEvent(t, c, sysevents.OffsetStored, field("topic", "m"))
	for _, typ := range []sysevents.Type{sysevents.GroupJoined, sysevents.GroupLeft, sysevents.GroupRebalanced} {
		require.Empty(t, events(t, c, typ), "%s about the system stream", typ)
	}
	for _, typ := range []sysevents.Type{sysevents.OffsetStored, sysevents.TopicCreated} {
		for _, m := range events(t, c, typ) {
			require.NotContains(t, string(m.Payload), sysevents.Stream, "%s about the system stream", typ)
		}
	}
}

// TestEventsOffOrDeleted: without Events.Enabled there is no system
// stream; a deleted system stream comes back at the next event.
func TestEventsOffOrDeleted(t *testing.T) {
	t.Parallel()
	off := brokertest.Start(t)
	c := client(t, off.Addr(), "iggy", "iggy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.ListStreams(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	ev, err := sysevents.New(sysevents.ConnectorStatusChanged, sysevents.SourceRuntime, "x", "k", time.Now(), struct{}{})
	require.NoError(t, err)
	require.False(t, off.PublishEvent(ev), "events off")

	on, c := eventsBroker(t)
	ev.Type = "no.such_type"
	require.False(t, on.PublishEvent(ev), "not a catalog type")
	require.NoError(t, c.DeleteStream(ctx, iggy.NamedID(sysevents.Stream)))
	_, err = c.CreateStream(ctx, "after")
	require.NoError(t, err)
	ev = waitEvent(t, c, sysevents.StreamCreated, field("stream", "after"))
	require.Equal(t, "streams/after", ev.Subject)
	st, err := c.GetStream(ctx, iggy.NamedID(sysevents.Stream))
	require.NoError(t, err)
	require.Equal(t, sysevents.ReservedStreamID, st.ID)
	require.Len(t, st.Topics, len(sysevents.Types()))
}

// TestEventsSurviveARestart: the system stream and its events are in the
// data directory; a restart keeps them and the retention settings.
func TestEventsSurviveARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, c := eventsBroker(t, brokertest.DataDir(dir))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateStream(ctx, "kept")
	require.NoError(t, err)
	waitEvent(t, c, sysevents.StreamCreated, field("stream", "kept"))
	require.NoError(t, c.Close())
	require.NoError(t, b.Close())

	_, c = eventsBroker(t, brokertest.DataDir(dir))
	waitEvent(t, c, sysevents.StreamCreated, field("stream", "kept"))
	tp, err := c.GetTopic(ctx, iggy.NamedID(sysevents.Stream), iggy.NamedID(sysevents.SegmentDeleted.Topic()))
	require.NoError(t, err)
	require.Equal(t, uint64(sysevents.DefaultMaxTopicSize), tp.MaxTopicSize)
}
