package influxdb

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "influxdb",
		Aliases: []string{"libiggy_connector_influxdb_sink"},
		Summary: "writes messages to InfluxDB as line-protocol points (/api/v2/write), committed after InfluxDB answers",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// builtinTags and builtinFields are the names the sink writes itself.
var (
	builtinTags   = []string{"stream", "topic", "partition", "offset"}
	builtinFields = []string{"message_id", "iggy_stream", "iggy_topic", "iggy_partition", "iggy_checksum",
		"iggy_origin_timestamp", "payload_json", "payload_text", "payload_base64"}
)

func checkNameValue(v any) error {
	s, _ := v.(string)
	if err := checkName(s); err != nil {
		return err
	}
	if strings.HasPrefix(s, "#") {
		return errors.New("a name starting with # would make the line a comment")
	}
	return nil
}

func checkOneName(v any) error {
	s, _ := v.(string)
	return checkName(s)
}

// SinkSpec is the sink's plugin_config: upstream's keys, then Ferry's.
var SinkSpec = connector.NewSpec(append([]connector.Field{
	connector.NewEnumField("version", "v2", "v3").WithDefault("v2").WithCheck(checkVersion).
		WithDoc("the write API: v2 (/api/v2/write: InfluxDB 2.x, and 1.8+ with bucket \"db/rp\")"),
	connector.NewStringField("url").Require().WithExample("http://localhost:8086").WithCheck(checkURL).
		WithDoc("the server, http:// or https://"),
	connector.NewStringField("org").Require().WithExample("acme").
		WithCheck(func(v any) error {
			if strings.TrimSpace(v.(string)) == "" {
				return errors.New("expected an organization name (InfluxDB 1.8 ignores it; any name does)")
			}
			return nil
		}).WithDoc("the organization (1.8 ignores it)"),
	connector.NewStringField("bucket").Require().WithExample("telemetry").
		WithCheck(func(v any) error {
			if v == "" {
				return errors.New("expected a bucket name")
			}
			return nil
		}).WithDoc("the bucket; on 1.8 \"database\" or \"database/retention_policy\""),
	connector.NewStringField("token").Require().AsSecret().WithExample("my-secret-token").
		WithDoc("an API token with write access (1.8: \"user:password\", or anything with auth off); a secret"),
	connector.NewStringField("measurement").WithDefault("iggy_messages").WithCheck(checkNameValue).
		WithDoc("the measurement of every point"),
	connector.NewEnumField("precision", "ns", "us", "ms", "s").WithDefault("us").
		WithDoc("the unit of point timestamps; ms and s truncate the message timestamp"),
	connector.NewIntField("batch_size").Between(0, 1<<31).WithDefault(500).
		WithDoc("points per write request (0 is 1); a batch is split into requests of this size"),
	connector.NewEnumField("payload_format", "json", "text", "base64").WithDefault("json").
		WithAliases(map[string]string{"utf8": "text", "raw": "base64"}).
		WithDoc("how the payload is stored: json → payload_json, text → payload_text, base64 → payload_base64 (string fields)"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("write stream, topic and partition (as tags, or as iggy_* fields where their tag flag is off)"),
	connector.NewBoolField("include_checksum").WithDefault(true).WithDoc("write the iggy_checksum field"),
	connector.NewBoolField("include_origin_timestamp").WithDefault(true).WithDoc("write the iggy_origin_timestamp field (µs)"),
	connector.NewBoolField("include_stream_tag").WithDefault(true).WithDoc("stream as the tag stream (else the field iggy_stream)"),
	connector.NewBoolField("include_topic_tag").WithDefault(true).WithDoc("topic as the tag topic (else the field iggy_topic)"),
	connector.NewBoolField("include_partition_tag").WithDefault(true).WithDoc("partition as the tag partition (else the field iggy_partition)"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each write at info instead of debug"),
}, append(resilienceFields(30*time.Second),
	connector.NewListField("tags", connector.NewStringField("").WithCheck(checkOneName)).WithDefault([]string{}).
		WithDoc("Ferry: keys of a JSON payload whose values become tags of the same name (missing, null or \"\": no tag)"),
	connector.NewListField("fields", connector.NewStringField("").WithCheck(checkOneName)).WithDefault([]string{}).
		WithDoc("Ferry: keys of a JSON payload whose values become fields (numbers as floats, strings, booleans; objects and arrays as JSON text)"),
	connector.NewStringField("timestamp_field").WithDefault("").
		WithDoc("Ferry: key of a JSON payload holding the point's time (an integer in precision units, or RFC 3339); default the message's Iggy timestamp"),
	connector.NewBoolField("include_offset_tag").WithDefault(true).
		WithDoc("Ferry: write the offset tag (upstream always does); turn off only when tags and timestamp_field identify a point"),
	connector.NewBoolField("include_payload").WithDefault(true).
		WithDoc("Ferry: write the payload field of payload_format (off: only message_id, metadata and fields)"),
	connector.NewEnumField("integer_type", "auto", "unsigned", "signed").WithDefault("auto").
		WithDoc("Ferry: how iggy_partition, iggy_checksum and iggy_origin_timestamp are written: unsigned (upstream's 123u), signed (123i; InfluxDB 1.x has no unsigned), auto: signed when the server has no /api/v2/setup (1.x)"),
)...)...).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	seen := map[string]string{}
	for _, n := range builtinTags {
		seen[n] = "a tag the sink writes"
	}
	for _, n := range builtinFields {
		seen[n] = "a field the sink writes"
	}
	for _, key := range []string{"tags", "fields"} {
		for i, n := range s.Strings(key) {
			if n == "time" {
				fail(fmt.Sprintf("%s[%d]", key, i), "InfluxDB refuses a tag or field named time")
			} else if what, dup := seen[n]; dup {
				fail(fmt.Sprintf("%s[%d]", key, i), "%q is already %s", n, what)
			}
			seen[n] = "in tags or fields"
		}
	}
	if s.String("payload_format") != "json" && (len(s.Strings("tags")) > 0 || len(s.Strings("fields")) > 0 || s.String("timestamp_field") != "") {
		fail("payload_format", "tags, fields and timestamp_field read JSON payloads; payload_format must be json")
	}
})

// Sink is the influxdb sink.
type Sink struct {
	c                                         *client
	writeQuery                                url.Values
	measurement, precision, format            string
	batchSize                                 int
	meta, checksum, origin                    bool
	streamTag, topicTag, partitionTag, offset bool
	payload                                   bool
	tags, fields                              []string
	tsField                                   string
	intType                                   string
	signed                                    bool
	verbose                                   bool
	breaker                                   *breaker
	log                                       *slog.Logger
}

// NewSink builds an influxdb sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		c:           newClient(set, cfg.Logger),
		writeQuery:  url.Values{"org": {set.String("org")}, "bucket": {set.String("bucket")}, "precision": {set.String("precision")}},
		measurement: set.String("measurement"), precision: set.String("precision"), format: set.String("payload_format"),
		batchSize: max(1, set.Int("batch_size")), meta: set.Bool("include_metadata"), checksum: set.Bool("include_checksum"),
		origin: set.Bool("include_origin_timestamp"), streamTag: set.Bool("include_stream_tag"), topicTag: set.Bool("include_topic_tag"),
		partitionTag: set.Bool("include_partition_tag"), offset: set.Bool("include_offset_tag"), payload: set.Bool("include_payload"),
		tags: set.Strings("tags"), fields: set.Strings("fields"), tsField: set.String("timestamp_field"),
		intType: set.String("integer_type"), verbose: set.Bool("verbose_logging") || cfg.Verbose,
		breaker: &breaker{threshold: set.Int("circuit_breaker_threshold"), coolDown: set.Duration("circuit_breaker_cool_down")},
		log:     cfg.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	slices.Sort(s.tags)
	s.signed = s.intType == "signed"
	return s, nil
}

// Open checks the server's health (upstream's startup probe) and, for
// integer_type = "auto", whether it has unsigned integers.
func (s *Sink) Open(ctx context.Context) error {
	if err := s.c.health(ctx); err != nil {
		return err
	}
	if s.intType == "auto" {
		_, err := s.c.do(ctx, http.MethodGet, "/api/v2/setup", nil, nil, nil)
		var se *statusError
		s.signed = errors.As(err, &se) && se.status == http.StatusNotFound
		if err != nil && !s.signed && !errors.As(err, &se) {
			return fmt.Errorf("influxdb: probing %s: %w", s.c.base, err)
		}
	}
	return nil
}

// Close releases idle connections.
func (s *Sink) Close(context.Context) error {
	s.c.http.CloseIdleConnections()
	return nil
}

// Consume writes the batch in requests of batch_size points. A point the
// server refuses (400) is found by halving the request until it stands
// alone, and is reported with the server's reason; writing the others
// again is harmless, as a point overwrites the one with its measurement,
// tags and time.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if s.breaker.open() {
		return connector.Unavailable(errors.New("influxdb: the circuit breaker is open after repeated failures"))
	}
	failed := connector.MessageErrors{}
	lines := make([][]byte, len(b.Messages))
	var todo []int
	for i := range b.Messages {
		line, err := s.line(nil, b, &b.Messages[i])
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		lines[i] = line
		todo = append(todo, i)
	}
	for start := 0; start < len(todo); start += s.batchSize {
		chunk := todo[start:min(len(todo), start+s.batchSize)]
		if err := s.write(ctx, lines, chunk, failed); err != nil {
			s.breaker.record(false)
			return err
		}
	}
	s.breaker.record(true)
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "wrote points", "bucket", s.writeQuery.Get("bucket"), "points", len(b.Messages)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// write posts the lines of the messages idx, halving on a refusal.
func (s *Sink) write(ctx context.Context, lines [][]byte, idx []int, failed connector.MessageErrors) error {
	var body bytes.Buffer
	for _, i := range idx {
		body.Write(lines[i])
		body.WriteByte('\n')
	}
	err := s.c.retry(ctx, "InfluxDB write", func() error {
		_, err := s.c.do(ctx, http.MethodPost, "/api/v2/write", s.writeQuery, body.Bytes(),
			http.Header{"Content-Type": {"text/plain; charset=utf-8"}})
		return err
	})
	var se *statusError
	if err == nil || !errors.As(err, &se) || (se.status != http.StatusBadRequest && se.status != http.StatusRequestEntityTooLarge) {
		if err != nil && se != nil {
			return fmt.Errorf("influxdb: writing to bucket %q: %w", s.writeQuery.Get("bucket"), err)
		}
		return err
	}
	if len(idx) == 1 {
		failed[idx[0]] = connector.Permanent(fmt.Errorf("InfluxDB refused the point: %s", se.reason))
		return nil
	}
	half := len(idx) / 2
	if err := s.write(ctx, lines, idx[:half], failed); err != nil {
		return err
	}
	return s.write(ctx, lines, idx[half:], failed)
}

// line appends the point of m (see the package doc for its shape).
func (s *Sink) line(buf []byte, b *connector.SinkBatch, m *connector.Message) ([]byte, error) {
	var doc map[string]any
	if len(s.tags) > 0 || len(s.fields) > 0 || s.tsField != "" {
		d := json.NewDecoder(bytes.NewReader(m.Payload))
		d.UseNumber()
		if err := d.Decode(&doc); err != nil {
			return nil, fmt.Errorf("the payload is not a JSON object: %w", err)
		}
	}
	buf = appendName(buf, s.measurement, measurementName)
	stream, topic := b.Stream, b.Topic
	if m.Stream != "" {
		stream, topic = m.Stream, m.Topic
	}
	tag := func(k, v string) error {
		if err := checkName(v); err != nil {
			return fmt.Errorf("tag %s: %w", k, err)
		}
		buf = append(appendName(append(buf, ','), k, keyName), '=')
		buf = appendName(buf, v, keyName)
		return nil
	}
	if s.meta && s.streamTag {
		if err := tag("stream", stream); err != nil {
			return nil, err
		}
	}
	if s.meta && s.topicTag {
		if err := tag("topic", topic); err != nil {
			return nil, err
		}
	}
	if s.meta && s.partitionTag {
		buf = strconv.AppendUint(append(buf, ",partition="...), uint64(b.Partition), 10)
	}
	if s.offset {
		buf = strconv.AppendUint(append(buf, ",offset="...), m.Offset, 10)
	}
	for _, k := range s.tags {
		v, ok := tagValue(doc[k])
		if !ok {
			continue
		}
		if err := tag(k, v); err != nil {
			return nil, err
		}
	}
	buf = append(buf, " message_id="...)
	buf = appendString(buf, uuid.UUID(m.ID).String())
	if s.meta && !s.streamTag {
		buf = appendString(append(buf, ",iggy_stream="...), stream)
	}
	if s.meta && !s.topicTag {
		buf = appendString(append(buf, ",iggy_topic="...), topic)
	}
	if s.meta && !s.partitionTag {
		buf = s.appendUint(append(buf, ",iggy_partition="...), uint64(b.Partition))
	}
	if s.checksum {
		buf = s.appendUint(append(buf, ",iggy_checksum="...), m.Checksum)
	}
	if s.origin {
		var us uint64
		if !m.OriginTimestamp.IsZero() && m.OriginTimestamp.UnixMicro() > 0 {
			us = uint64(m.OriginTimestamp.UnixMicro())
		}
		buf = s.appendUint(append(buf, ",iggy_origin_timestamp="...), us)
	}
	if s.payload {
		var err error
		if buf, err = s.appendPayload(buf, m.Payload); err != nil {
			return nil, err
		}
	}
	for _, k := range s.fields {
		v, ok := doc[k]
		if !ok || v == nil {
			continue
		}
		buf = append(appendName(append(buf, ','), k, keyName), '=')
		var err error
		if buf, err = appendField(buf, v); err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
	}
	ts, err := s.timestamp(m, doc)
	if err != nil {
		return nil, err
	}
	return strconv.AppendInt(append(buf, ' '), ts, 10), nil
}

func (s *Sink) appendUint(buf []byte, v uint64) []byte {
	if s.signed {
		return append(strconv.AppendInt(buf, int64(v), 10), 'i') // bit for bit
	}
	return append(strconv.AppendUint(buf, v, 10), 'u')
}

func (s *Sink) appendPayload(buf, p []byte) ([]byte, error) {
	switch s.format {
	case "text":
		if !utf8.Valid(p) {
			return nil, errors.New("the payload is not UTF-8 text (payload_format = \"text\")")
		}
		return appendString(append(buf, ",payload_text="...), string(p)), nil
	case "base64":
		return appendString(append(buf, ",payload_base64="...), base64.StdEncoding.EncodeToString(p)), nil
	}
	var c bytes.Buffer
	if err := json.Compact(&c, p); err != nil {
		return nil, fmt.Errorf("the payload is not JSON (payload_format = \"json\"): %w", err)
	}
	return appendString(append(buf, ",payload_json="...), c.String()), nil
}

// tagValue is a JSON value as a tag value; false for none.
func tagValue(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, x != ""
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	default:
		b, _ := json.Marshal(x)
		return string(b), true
	}
}

// appendField appends a JSON value as a field value.
func appendField(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return appendString(buf, x), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case json.Number:
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			return nil, fmt.Errorf("%s is no float: %w", x, err)
		}
		return strconv.AppendFloat(buf, f, 'g', -1, 64), nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return appendString(buf, string(b)), nil
	}
}

// timestamp is the point's time in precision units: timestamp_field's
// value, else the message's Iggy timestamp, else its origin timestamp.
// Never the time of writing: a message written again must land on the
// same point.
func (s *Sink) timestamp(m *connector.Message, doc map[string]any) (int64, error) {
	if s.tsField != "" {
		switch v := doc[s.tsField].(type) {
		case json.Number:
			n, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("timestamp_field %s: %s is not an integer (%s): %w", s.tsField, v, s.precision, err)
			}
			return n, nil
		case string:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return 0, fmt.Errorf("timestamp_field %s: %w", s.tsField, err)
			}
			return s.inPrecision(t), nil
		default:
			return 0, fmt.Errorf("timestamp_field %s: missing, or neither an integer nor an RFC 3339 string", s.tsField)
		}
	}
	t := m.Timestamp
	if t.IsZero() {
		t = m.OriginTimestamp
	}
	if t.IsZero() {
		return 0, errors.New("the message has no timestamp to give its point")
	}
	return s.inPrecision(t.Truncate(time.Microsecond)), nil
}

func (s *Sink) inPrecision(t time.Time) int64 {
	switch s.precision {
	case "ns":
		return t.UnixNano()
	case "ms":
		return t.UnixMilli()
	case "s":
		return t.Unix()
	}
	return t.UnixMicro()
}
