package sysevents_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/stretchr/testify/require"
)

func TestCatalogIsClosedAndDocumented(t *testing.T) {
	t.Parallel()
	types := sysevents.Types()
	require.Len(t, types, 19)
	seen := map[sysevents.Type]bool{}
	for _, ti := range types {
		require.False(t, seen[ti.Type], "%s listed twice", ti.Type)
		seen[ti.Type] = true
		require.NotEmpty(t, ti.Doc, ti.Type)
		require.Contains(t, []sysevents.Origin{sysevents.OriginBroker, sysevents.OriginRuntime}, ti.Origin)
		require.Regexp(t, `^[a-z]+\.[a-z_]+$`, string(ti.Type))
		require.True(t, ti.Type.Known())
		require.Equal(t, string(ti.Type), ti.Type.Topic())
	}
	require.Equal(t, []sysevents.Type{sysevents.ConnectorStatusChanged, sysevents.MessageDeadLettered},
		sysevents.TypesOf(sysevents.OriginRuntime))
	require.Len(t, sysevents.TypesOf(sysevents.OriginBroker), 17)
}

func TestTriggerFor(t *testing.T) {
	t.Parallel()
	tr, err := sysevents.TriggerFor(" segment.deleted ")
	require.NoError(t, err)
	require.Equal(t, sysevents.Trigger{Type: sysevents.SegmentDeleted, Stream: "ferry.events",
		Topic: "segment.deleted", Origin: sysevents.OriginBroker}, tr)
	tr, err = sysevents.TriggerFor("connector.status_changed")
	require.NoError(t, err)
	require.Equal(t, sysevents.OriginRuntime, tr.Origin)

	_, err = sysevents.TriggerFor("segment.delted")
	require.ErrorContains(t, err, `unknown event type "segment.delted" (did you mean "segment.deleted"?)`)
	require.ErrorContains(t, err, "known types: client.connected")
	_, err = sysevents.TriggerFor("")
	require.ErrorContains(t, err, "unknown event type")
}

// validCloudEvent is an independent check of the CloudEvents 1.0 JSON
// format's rules for the attributes Ferry sets.
func validCloudEvent(t *testing.T, b []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	str := func(k string) string {
		var s string
		require.NoError(t, json.Unmarshal(m[k], &s), "%s is a string", k)
		return s
	}
	for _, k := range []string{"specversion", "id", "source", "type"} {
		require.Contains(t, m, k, "required attribute")
		require.NotEmpty(t, str(k))
	}
	require.Equal(t, "1.0", str("specversion"))
	_, err := time.Parse(time.RFC3339, str("time"))
	require.NoError(t, err)
	require.Equal(t, "application/json", str("datacontenttype"))
	require.True(t, json.Valid(m["data"]))
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, str("id"), "a UUID v8")
	for k := range m {
		require.Regexp(t, `^[a-z0-9]{1,20}$`, k, "attribute name")
	}
}

func TestEnvelope(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	data := sysevents.SegmentData{Stream: "s", Topic: "t", FirstOffset: 0, LastOffset: 99, Segments: 1, Messages: 100, Reason: sysevents.ReasonExpiry}
	ev, err := sysevents.New(sysevents.SegmentDeleted, sysevents.SourceBroker, "streams/s/topics/t/partitions/0", "k1", at, data)
	require.NoError(t, err)
	b, err := ev.Encode()
	require.NoError(t, err)
	validCloudEvent(t, b)
	require.Contains(t, string(b), `"time":"2025-03-01T11:00:00.123456789Z"`, "UTC")

	again, err := sysevents.New(sysevents.SegmentDeleted, sysevents.SourceBroker, "other", "k1", at.Add(time.Hour), data)
	require.NoError(t, err)
	require.Equal(t, ev.ID, again.ID, "same source, type and key: same id")
	other, err := sysevents.New(sysevents.SegmentDeleted, sysevents.SourceBroker, "", "k2", at, data)
	require.NoError(t, err)
	require.NotEqual(t, ev.ID, other.ID)

	got, err := sysevents.Decode(b)
	require.NoError(t, err)
	require.Equal(t, ev.ID, got.ID)
	require.True(t, got.Time.Equal(at))
	var d sysevents.SegmentData
	require.NoError(t, got.DecodeData(&d))
	require.Equal(t, data, d)

	m, err := ev.Message()
	require.NoError(t, err)
	id, err := sysevents.ParseID(ev.ID)
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.Equal(t, b, m.Payload)
	hs, err := wire.ParseTLV(m.Headers)
	require.NoError(t, err)
	require.Equal(t, "ce_type", string(hs[0].Key.Data))
	require.Equal(t, "segment.deleted", string(hs[0].Value.Data))
	require.Equal(t, uint64(at.UnixMicro()), m.OriginTimestamp)
	_, err = wire.AppendBatch(nil, []wire.Message{m})
	require.NoError(t, err, "the message is a valid batch")
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	ok := `{"specversion":"1.0","id":"a","source":"/x","type":"t","time":"2025-01-01T00:00:00Z","datacontenttype":"application/json","data":{}}`
	_, err := sysevents.Decode([]byte(ok))
	require.NoError(t, err)
	_, err = sysevents.Decode([]byte(`{"specversion":"1.0","id":"a","source":"/x","type":"t","ext1":"x"}`))
	require.NoError(t, err, "time, data and extensions are optional")
	for _, tc := range []struct{ in, want string }{
		{`{"id":"a","source":"/x","type":"t"}`, `required attribute "specversion" is missing`},
		{`{"specversion":"1.0","source":"/x","type":"t"}`, `required attribute "id" is missing`},
		{`{"specversion":"1.0","id":"a","type":"t"}`, `"source" is missing`},
		{`{"specversion":"1.0","id":"a","source":"/x"}`, `"type" is missing`},
		{`{"specversion":"0.3","id":"a","source":"/x","type":"t"}`, `specversion "0.3"`},
		{`{"specversion":"1.0","id":"","source":"/x","type":"t"}`, "id is empty"},
		{`{"specversion":"1.0","id":"a","source":"/x","type":"t","time":"yesterday"}`, "invalid event"},
		{`{"specversion":"1.0","id":"a","source":"/x","type":"t","datacontenttype":"text/xml","data":{}}`, "datacontenttype"},
		{`{"specversion":"1.0","id":7,"source":"/x","type":"t"}`, "invalid event"},
		{`[1]`, "invalid event"},
		{"{\"id\":\"\xff\"}", "not UTF-8"},
		{`{"specversion":"1.0","id":"a","source":"/x","type":"t","data":` + strings.Repeat("[", 1<<20) + `}`, "bytes, at most"},
	} {
		_, err := sysevents.Decode([]byte(tc.in))
		require.ErrorIs(t, err, sysevents.ErrInvalid, tc.in[:min(len(tc.in), 80)])
		require.ErrorContains(t, err, tc.want)
	}
	_, err = sysevents.ParseID("not-a-uuid")
	require.ErrorContains(t, err, "is not a UUID")
}

func FuzzDecode(f *testing.F) {
	ev, _ := sysevents.New(sysevents.StreamCreated, sysevents.SourceBroker, "streams/s", "k", time.Now(), sysevents.StreamData{Stream: "s"})
	b, _ := ev.Encode()
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte(`{"specversion":"1.0","id":"a","source":"/x","type":"t"}`))
	f.Add([]byte(`{"specversion":null}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := sysevents.Decode(in)
		if err != nil {
			require.ErrorIs(t, err, sysevents.ErrInvalid)
			return
		}
		require.Equal(t, sysevents.SpecVersion, e.SpecVersion)
		require.NotEmpty(t, e.ID)
		require.NotEmpty(t, e.Source)
		require.NotEmpty(t, e.Type)
		out, err := e.Encode()
		require.NoError(t, err)
		_, err = sysevents.Decode(out)
		require.NoError(t, err, "what Decode accepts re-encodes to an event Decode accepts")
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNewMessage is the encoding cost of one event: New, Encode
// (inside Message) and the header TLV.
func BenchmarkNewMessage(b *testing.B) {
	at := time.Now()
	data := sysevents.OffsetData{Stream: "orders", Topic: "created", ConsumerKind: sysevents.ConsumerGroup, Group: "billing", Offset: 123456, Stores: 3}
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		ev, err := sysevents.New(sysevents.OffsetStored, sysevents.SourceBroker, "streams/orders/topics/created", "k", at, data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ev.Message(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/msg")
}
