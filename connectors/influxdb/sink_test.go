package influxdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { influxtest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "influx", Plugin: connector.PluginConfig{Source: "influx.toml", Values: values}}
}

func sinkValues(url, db string, extra map[string]any) map[string]any {
	v := map[string]any{"url": url, "org": "ferry", "bucket": db, "token": "ferry:secret", "max_retries": int64(1)}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

func newSink(t testing.TB, values map[string]any) *Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	return s.(*Sink)
}

// series is one series of an InfluxQL answer.
type series struct {
	Name    string          `json:"name"`
	Columns []string        `json:"columns"`
	Values  [][]interface{} `json:"values"`
}

// selectAll returns every series of db's measurements (InfluxQL over the
// v1 API, which reads names back exactly as stored).
func selectAll(t testing.TB, url, db, what string) []series {
	t.Helper()
	out, err := influxtest.Query(url, db, "SELECT "+what+" FROM /.*/")
	require.NoError(t, err)
	var r struct {
		Results []struct {
			Series []series `json:"series"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	if len(r.Results) == 0 {
		return nil
	}
	return r.Results[0].Series
}

// column returns the values of a column of every row of every series.
func column(ss []series, name string) []string {
	var out []string
	for _, s := range ss {
		for i, c := range s.Columns {
			if c != name {
				continue
			}
			for _, row := range s.Values {
				if v, ok := row[i].(string); ok {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink { return newSink(t, sinkValues(url, db, nil)) },
		Read: func(t *testing.T) []string {
			return column(selectAll(t, url, db, "payload_json"), "payload_json")
		},
		// A point written again overwrites itself: same measurement, tags
		// (offset among them) and time.
		Idempotent: true,
		Poison:     []byte("not json"),
	})
}

// Hostile measurement, tag and field names and values reach InfluxDB
// unchanged, or are refused whole; none changes another point.
func TestHostileNamesAndPayloads(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	measurement := `we ird,meas=ure"\x`
	s := newSink(t, sinkValues(url, db, map[string]any{
		"measurement": measurement, "tags": []any{"t a,g=k", "host"}, "fields": []any{"f i,e=ld\"", "v"},
		"include_payload": false, "include_checksum": false, "include_origin_timestamp": false,
	}))
	hostile := []string{`a b`, `a,b`, `a=b`, `"quoted"`, `back\slash`, `\x\,y`, `tab	x`, `ünï©ødé ✓`, `'; DROP DATABASE ` + db + `; --`,
		`#comment`, `a\"b`, "multi\nline", "cr\rx", `trailing\`, `\\`, `\ `}
	var msgs []connector.Message
	for i, h := range hostile {
		p, err := json.Marshal(map[string]any{"t a,g=k": h, "host": fmt.Sprintf("h%d", i), "f i,e=ld\"": h, "v": i})
		require.NoError(t, err)
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: p, Offset: uint64(i), Timestamp: time.Unix(1_700_000_000, 0)})
	}
	b := &connector.SinkBatch{Stream: `str eam,=x`, Topic: `to"pic\q`, Messages: msgs}
	err := s.Consume(context.Background(), b)
	unwritable := map[string]bool{`\x\,y`: true, "multi\nline": true, "cr\rx": true, `trailing\`: true, `\\`: true, `\ `: true}
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	for i, h := range hostile {
		if unwritable[h] {
			require.Contains(t, per, i, "%q cannot be a tag value", h)
			require.True(t, connector.IsPermanent(per[i]))
		} else {
			require.NotContains(t, per, i, "%q: %v", h, per[i])
		}
	}
	ss := selectAll(t, url, db, "*")
	require.Len(t, ss, 1)
	require.Equal(t, measurement, ss[0].Name)
	got := map[string]string{}
	idx := map[string]int{}
	for i, c := range ss[0].Columns {
		idx[c] = i
	}
	for _, c := range []string{"t a,g=k", "f i,e=ld\"", "stream", "topic", "host"} {
		require.Contains(t, idx, c, "columns %q", ss[0].Columns)
	}
	for _, row := range ss[0].Values {
		require.Equal(t, row[idx["t a,g=k"]], row[idx["f i,e=ld\""]], "the tag and the field hold the same text")
		require.Equal(t, `str eam,=x`, row[idx["stream"]])
		require.Equal(t, `to"pic\q`, row[idx["topic"]])
		got[row[idx["host"]].(string)] = row[idx["f i,e=ld\""]].(string)
	}
	for i, h := range hostile {
		if !unwritable[h] {
			require.Equal(t, h, got[fmt.Sprintf("h%d", i)], "message %d", i)
		}
	}
	require.Len(t, got, len(hostile)-len(unwritable))
	// The database named in a payload is still there.
	_, err = influxtest.Query(url, db, "SHOW MEASUREMENTS")
	require.NoError(t, err)
}

// String fields carry any text, newlines, quotes and backslashes
// included.
func TestStringFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	s := newSink(t, sinkValues(url, db, map[string]any{"payload_format": "text"}))
	texts := []string{"a\nb", `\`, `\\"`, `"`, "\r\n\t", `end\`, "x\\\ny", "ü"}
	var msgs []connector.Message
	for i, x := range texts {
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: []byte(x), Offset: uint64(i), Timestamp: time.Unix(1_700_000_000+int64(i), 0)})
	}
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t", Messages: msgs}))
	require.Equal(t, texts, column(selectAll(t, url, db, "payload_text"), "payload_text"))
}

// A point InfluxDB refuses is reported alone, with the server's reason;
// the others of its request are written.
func TestRefusedPointIsReportedWithReason(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	s := newSink(t, sinkValues(url, db, map[string]any{"fields": []any{"value"}, "batch_size": int64(4)}))
	var msgs []connector.Message
	for i := range 10 {
		p := fmt.Sprintf(`{"value":%d}`, i)
		if i == 6 {
			p = `{"value":"high"}`
		}
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: []byte(p), Offset: uint64(i), Timestamp: time.Unix(1_700_000_000, int64(i)*1000)})
	}
	err := s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t", Messages: msgs})
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Len(t, per, 1)
	require.True(t, connector.IsPermanent(per[6]))
	require.Contains(t, per[6].Error(), "field type conflict")
	require.Len(t, column(selectAll(t, url, db, "payload_json"), "payload_json"), 9)
}

func TestBadConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	for key, bad := range map[string]map[string]any{
		"url":            {"url": "localhost:8086"},
		"precision":      {"precision": "minutes"},
		"version":        {"version": "v3"},
		"measurement":    {"measurement": "#m"},
		"tags[0]":        {"tags": []any{"offset"}},
		"fields[0]":      {"fields": []any{"time"}},
		"payload_format": {"payload_format": "text", "tags": []any{"x"}},
		"token":          {"token": nil},
	} {
		v := sinkValues("http://127.0.0.1:1", "db", bad)
		if bad["token"] == nil && key == "token" {
			delete(v, "token")
		}
		_, err := NewSink(cfg(v))
		require.ErrorContains(t, err, "plugin_config."+key, "%v", bad)
	}
	// The token is never echoed.
	_, err := NewSink(cfg(sinkValues("http://127.0.0.1:1", "db", map[string]any{"token": int64(12345678)})))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "12345678")
}

// A server that is not there is Unavailable (the runtime keeps the batch
// and restarts the sink), not a rejection.
func TestDownServerIsUnavailable(t *testing.T) {
	t.Parallel()
	s, err := NewSink(cfg(sinkValues("http://127.0.0.1:1", "db", nil)))
	require.NoError(t, err)
	err = s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{{Payload: []byte(`{"n":1}`), Timestamp: time.Now()}}})
	require.True(t, connector.IsUnavailable(err), "%v", err)
	_ = strings.TrimSpace
}
