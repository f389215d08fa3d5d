package plugin

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// The line protocol (transport = "lines"): newline-delimited JSON on the
// plugin's standard input and output, one JSON object a line, each with a
// "type". docs/plugins.md is its reference; in short:
//
//	runtime → plugin  {"type":"open","protocol":1,"kind":"sink","key":..,"name":..,"config":{..},"state":..}  first, both kinds
//	runtime → sink    {"type":"batch","seq":N,"stream":..,"topic":..,"partition":..,"schema":..,"messages":[..]}
//	sink → runtime    {"type":"result","seq":N,"ok":true} | ..,"failed":[{"index":i,"kind":..,"reason":..}] | ..,"error":..
//	source → runtime  {"type":"batch","messages":[..],"state":<any JSON>} | {"type":"end"} | {"type":"error",..}
//	runtime → source  {"type":"ack","seq":N} | {"type":"nack","seq":N,"reason":..}
//
// A line the plugin writes that is not one of these is a protocol error:
// the plugin is killed and restarted and the batch in flight replayed.

// LinesProtocolVersion is the "protocol" of the open line.
const LinesProtocolVersion = 1

// DefaultMaxLine bounds a line a plugin writes on the line protocol
// (limits.max_line).
const DefaultMaxLine = 64 << 20

// ErrLineTooLong is returned by ReadLine for a line longer than its bound.
var ErrLineTooLong = errors.New("a line longer than limits.max_line")

// ReadLine reads one line of at most max bytes (without its "\n", and
// without a "\r" before it). At the end of the input it returns io.EOF,
// or the last line when it has no newline. A longer line is
// ErrLineTooLong; the reader is then in the middle of it.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 || (len(line)+len(chunk) > max && !bytes.HasSuffix(chunk, []byte("\n"))) {
			return nil, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case len(line) > 0:
			return line, nil // a last line without its newline
		default:
			return nil, err
		}
	}
}

// LineMessage is a message on the line protocol.
type LineMessage struct {
	// ID is a UUID ("0190…-…"), or absent (none: Ferry assigns one).
	ID string `json:"id,omitempty"`
	// Exactly one of the three payload forms: Payload, the JSON value
	// itself (a sink gets it when the batch's schema is json and the
	// payload is JSON); PayloadText, UTF-8 text (schema text); or
	// PayloadBase64, any bytes.
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadText   *string         `json:"payload_text,omitempty"`
	PayloadBase64 *string         `json:"payload_base64,omitempty"`
	// Headers are Iggy's user headers with string keys: a string, a bool
	// or a number (an integer is an int64, any other a float64), or
	// {"kind":"raw"|"int128"|…,"base64":"…"} for any kind.
	Headers map[string]json.RawMessage `json:"headers,omitempty"`
	// Offset, Timestamp and Checksum come with a sink's messages:
	// the offset in the partition, and when Iggy appended it (µs since the
	// Unix epoch).
	Offset    *uint64 `json:"offset,omitempty"`
	Timestamp int64   `json:"timestamp,omitempty"`
	// OriginTimestamp is when the message was made (µs); 0: when sent.
	OriginTimestamp int64 `json:"origin_timestamp,omitempty"`
}

type headerObject struct {
	Kind   string `json:"kind"`
	Base64 string `json:"base64"`
}

// lineMessage is pm on the line protocol; schema says how its payload is
// written.
func lineMessage(pm *pluginpb.Message, schema string) LineMessage {
	lm := LineMessage{Timestamp: pm.TimestampUs, OriginTimestamp: pm.OriginTimestampUs}
	off := pm.Offset
	lm.Offset = &off
	if len(pm.Id) == 16 {
		lm.ID = uuid.UUID(pm.Id).String()
	}
	switch {
	case (schema == "" || schema == "json") && json.Valid(pm.Payload):
		var b bytes.Buffer
		_ = json.Compact(&b, pm.Payload) // valid
		lm.Payload = b.Bytes()
	case schema == "text" && utf8.Valid(pm.Payload):
		s := string(pm.Payload)
		lm.PayloadText = &s
	default:
		s := base64.StdEncoding.EncodeToString(pm.Payload)
		lm.PayloadBase64 = &s
	}
	for _, h := range pm.Headers {
		if h.KeyKind != pluginpb.HeaderKind(header.KindString) && h.KeyKind != 0 {
			continue // a binary key has no place in a JSON object
		}
		if lm.Headers == nil {
			lm.Headers = map[string]json.RawMessage{}
		}
		lm.Headers[string(h.Key)] = headerJSON(header.Kind(h.Kind), h.Value)
	}
	return lm
}

func headerJSON(k header.Kind, v []byte) json.RawMessage {
	if k == 0 {
		k = header.KindString
	}
	var x any
	if n := k.FixedSize(); n == 0 || len(v) == n {
		switch k {
		case header.KindString:
			if utf8.Valid(v) {
				x = string(v)
			}
		case header.KindBool:
			x = v[0] == 1
		case header.KindInt8:
			x = int8(v[0])
		case header.KindInt16:
			x = int16(binary.LittleEndian.Uint16(v))
		case header.KindInt32:
			x = int32(binary.LittleEndian.Uint32(v))
		case header.KindInt64:
			x = int64(binary.LittleEndian.Uint64(v))
		case header.KindUint8:
			x = v[0]
		case header.KindUint16:
			x = binary.LittleEndian.Uint16(v)
		case header.KindUint32:
			x = binary.LittleEndian.Uint32(v)
		case header.KindUint64:
			x = binary.LittleEndian.Uint64(v)
		case header.KindFloat32:
			if f := math.Float32frombits(binary.LittleEndian.Uint32(v)); !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f)) {
				x = f
			}
		case header.KindFloat64:
			if f := math.Float64frombits(binary.LittleEndian.Uint64(v)); !math.IsInf(f, 0) && !math.IsNaN(f) {
				x = f
			}
		}
	}
	if x == nil {
		x = headerObject{Kind: k.String(), Base64: base64.StdEncoding.EncodeToString(v)}
	}
	b, _ := json.Marshal(x)
	return b
}

var kindByName = func() map[string]header.Kind {
	m := map[string]header.Kind{}
	for k := header.KindRaw; k <= header.KindFloat64; k++ {
		m[k.String()] = k
	}
	return m
}()

// protoMessage is a message a plugin wrote, for MessageFromProto's checks.
func (lm *LineMessage) protoMessage() (*pluginpb.Message, error) {
	pm := &pluginpb.Message{OriginTimestampUs: lm.OriginTimestamp, TimestampUs: lm.Timestamp}
	if lm.Offset != nil {
		pm.Offset = *lm.Offset
	}
	if lm.ID != "" {
		id, err := uuid.Parse(lm.ID)
		if err != nil {
			return nil, fmt.Errorf("id %q is not a UUID", lm.ID)
		}
		pm.Id = id[:]
	}
	forms := 0
	if lm.Payload != nil {
		forms++
		var b bytes.Buffer
		if err := json.Compact(&b, lm.Payload); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		pm.Payload = b.Bytes()
	}
	if lm.PayloadText != nil {
		forms++
		pm.Payload = []byte(*lm.PayloadText)
	}
	if lm.PayloadBase64 != nil {
		forms++
		b, err := base64.StdEncoding.DecodeString(*lm.PayloadBase64)
		if err != nil {
			return nil, fmt.Errorf("payload_base64: %w", err)
		}
		pm.Payload = b
	}
	if forms != 1 {
		return nil, fmt.Errorf("%d of payload, payload_text and payload_base64 (want exactly one)", forms)
	}
	for k, raw := range lm.Headers {
		h, err := headerFromJSON(k, raw)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		pm.Headers = append(pm.Headers, h)
	}
	return pm, nil
}

func headerFromJSON(key string, raw json.RawMessage) (*pluginpb.Header, error) {
	h := &pluginpb.Header{Key: []byte(key), KeyKind: pluginpb.HeaderKind(header.KindString)}
	var x any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	var v header.Value
	switch y := x.(type) {
	case string:
		v = header.StringValue(y)
	case bool:
		v = header.BoolValue(y)
	case json.Number:
		if n, err := strconv.ParseInt(string(y), 10, 64); err == nil {
			v = header.Int64Value(n)
		} else if f, err := y.Float64(); err == nil {
			v = header.Float64Value(f)
		} else {
			return nil, fmt.Errorf("the number %s fits no header type", y)
		}
	case map[string]any:
		var o headerObject
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		k, ok := kindByName[o.Kind]
		if !ok {
			return nil, fmt.Errorf("kind %q is not an Iggy header type", o.Kind)
		}
		b, err := base64.StdEncoding.DecodeString(o.Base64)
		if err != nil {
			return nil, fmt.Errorf("base64: %w", err)
		}
		v = header.Value{Kind: k, Data: b}
	default:
		return nil, fmt.Errorf("a %s (want a string, a bool, a number or {\"kind\",\"base64\"})", jsonKind(x))
	}
	h.Kind, h.Value = pluginpb.HeaderKind(v.Kind), v.Data
	return h, nil
}

func jsonKind(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", x)
}

// OpenLine is the first line the runtime writes to a plugin: its kind,
// key and name, plugin_config as a JSON object, and (for a source) the
// last saved state: the JSON value a batch line carried, or, for a state
// that is not JSON, its bytes as "state_base64"; absent on the first run.
func OpenLine(kind Kind, key, name, configJSON string, state []byte, verbose bool) []byte {
	o := struct {
		Type        string          `json:"type"`
		Protocol    int             `json:"protocol"`
		Kind        Kind            `json:"kind"`
		Key         string          `json:"key"`
		Name        string          `json:"name"`
		Verbose     bool            `json:"verbose,omitempty"`
		Config      json.RawMessage `json:"config"`
		State       json.RawMessage `json:"state,omitempty"`
		StateBase64 string          `json:"state_base64,omitempty"`
	}{Type: "open", Protocol: LinesProtocolVersion, Kind: kind, Key: key, Name: name, Verbose: verbose,
		Config: json.RawMessage(configJSON)}
	if configJSON == "" || !json.Valid([]byte(configJSON)) {
		o.Config = json.RawMessage("{}")
	}
	if state != nil {
		var b bytes.Buffer
		if json.Compact(&b, state) == nil && b.Len() > 0 {
			o.State = b.Bytes()
		} else {
			o.StateBase64 = base64.StdEncoding.EncodeToString(state)
		}
	}
	return marshalLine(o)
}

// SinkBatchLine is the line of one batch for a sink, numbered seq.
func SinkBatchLine(seq uint64, req *pluginpb.ConsumeRequest) []byte {
	schema := req.Schema
	if schema == "" {
		schema = "json"
	}
	b := struct {
		Type      string        `json:"type"`
		Seq       uint64        `json:"seq"`
		Stream    string        `json:"stream"`
		Topic     string        `json:"topic"`
		Partition uint32        `json:"partition"`
		Schema    string        `json:"schema"`
		Messages  []LineMessage `json:"messages"`
	}{Type: "batch", Seq: seq, Stream: req.Stream, Topic: req.Topic, Partition: req.Partition, Schema: schema,
		Messages: make([]LineMessage, len(req.Messages))}
	for i, m := range req.Messages {
		b.Messages[i] = lineMessage(m, schema)
	}
	return marshalLine(b)
}

// AckLine tells a source that batch seq is in Iggy and its state saved.
func AckLine(seq uint64) []byte {
	return marshalLine(struct {
		Type string `json:"type"`
		Seq  uint64 `json:"seq"`
	}{"ack", seq})
}

// NackLine tells a source that batch seq failed to reach Iggy; the
// runtime sends it again itself (an ack of the same seq follows).
func NackLine(seq uint64, reason string) []byte {
	return marshalLine(struct {
		Type   string `json:"type"`
		Seq    uint64 `json:"seq"`
		Reason string `json:"reason"`
	}{"nack", seq, reason})
}

func marshalLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("plugin: a line protocol line: %v", err)) // only plain types above
	}
	return append(b, '\n')
}

// lineFailure is a failure as a plugin writes it: an object with a kind
// and a reason, or a string (the reason; kind retry).
type lineFailure struct {
	Index  *int64 `json:"index"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

func (f *lineFailure) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*f = lineFailure{Reason: s}
		return nil
	}
	type plain lineFailure
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New("want an object with kind and reason, or a string")
	}
	*f = lineFailure(p)
	return nil
}

func (f *lineFailure) proto() (*pluginpb.Failure, error) {
	k := pluginpb.FailureKind_FAILURE_KIND_RETRY
	switch f.Kind {
	case "", "retry":
	case "permanent":
		k = pluginpb.FailureKind_FAILURE_KIND_PERMANENT
	case "unavailable":
		k = pluginpb.FailureKind_FAILURE_KIND_UNAVAILABLE
	default:
		return nil, fmt.Errorf("kind %q (want permanent, retry or unavailable)", f.Kind)
	}
	return &pluginpb.Failure{Kind: k, Reason: f.Reason}, nil
}

// lineHead is what every line has.
type lineHead struct {
	Type string `json:"type"`
}

// DecodeResult reads a sink's line: a result of batch seq, as
// Consume's answer. It fails on anything else (a protocol error).
func DecodeResult(line []byte) (seq uint64, resp *pluginpb.ConsumeResponse, err error) {
	var r struct {
		Type   string         `json:"type"`
		Seq    *uint64        `json:"seq"`
		OK     *bool          `json:"ok"`
		Failed []*lineFailure `json:"failed"`
		Error  *lineFailure   `json:"error"`
	}
	if err := decodeLine(line, &r); err != nil {
		return 0, nil, err
	}
	if r.Type != "result" {
		return 0, nil, fmt.Errorf("a line of type %q (a sink answers each batch with a result)", r.Type)
	}
	if r.Seq == nil {
		return 0, nil, errors.New("a result without its batch's seq")
	}
	answers := 0
	resp = &pluginpb.ConsumeResponse{}
	if r.OK != nil {
		if !*r.OK && len(r.Failed) == 0 && r.Error == nil {
			return 0, nil, errors.New(`"ok": false without "failed" or "error"`)
		}
		if *r.OK {
			answers++
		}
	}
	if len(r.Failed) > 0 {
		answers++
		for i, f := range r.Failed {
			if f == nil || f.Index == nil {
				return 0, nil, fmt.Errorf("failed[%d] names no message index", i)
			}
			if *f.Index < 0 || *f.Index > math.MaxUint32 {
				return 0, nil, fmt.Errorf("failed[%d]: index %d", i, *f.Index)
			}
			pf, err := f.proto()
			if err != nil {
				return 0, nil, fmt.Errorf("failed[%d]: %w", i, err)
			}
			resp.Failures = append(resp.Failures, &pluginpb.MessageFailure{Index: uint32(*f.Index), Kind: pf.Kind, Reason: pf.Reason})
		}
	}
	if r.Error != nil {
		answers++
		if resp.Error, err = r.Error.proto(); err != nil {
			return 0, nil, fmt.Errorf("error: %w", err)
		}
	}
	if answers != 1 {
		return 0, nil, fmt.Errorf(`a result with %d of "ok": true, "failed" and "error" (want exactly one)`, answers)
	}
	return *r.Seq, resp, nil
}

// SourceLine is a line a source wrote: a batch, the end of its input or
// an error.
type SourceLine struct {
	// Batch is set for a batch line: Seq is the plugin's "seq", or 0 when
	// it gave none (then the runtime numbers its batches from 1).
	Batch *pluginpb.Batch
	// End: there will be nothing more (connector.ErrEndOfInput).
	End bool
	// Error: the source failed; the runtime restarts it from its state.
	Error *pluginpb.Failure
}

// DecodeSourceLine reads a source's line. It fails on anything that is
// not a batch, an end or an error line (a protocol error).
func DecodeSourceLine(line []byte) (SourceLine, error) {
	var r struct {
		Type     string          `json:"type"`
		Seq      uint64          `json:"seq"`
		Schema   string          `json:"schema"`
		Messages []*LineMessage  `json:"messages"`
		State    json.RawMessage `json:"state"`
		Kind     string          `json:"kind"`
		Reason   string          `json:"reason"`
	}
	if err := decodeLine(line, &r); err != nil {
		return SourceLine{}, err
	}
	switch r.Type {
	case "end":
		return SourceLine{End: true}, nil
	case "error":
		f, err := (&lineFailure{Kind: r.Kind, Reason: r.Reason}).proto()
		if err != nil {
			return SourceLine{}, err
		}
		return SourceLine{Error: f}, nil
	case "batch":
	default:
		return SourceLine{}, fmt.Errorf("a line of type %q (a source writes batch, end or error lines)", r.Type)
	}
	if err := CheckSchema(r.Schema); err != nil {
		return SourceLine{}, err
	}
	b := &pluginpb.Batch{Seq: r.Seq, Schema: r.Schema, Messages: make([]*pluginpb.Message, len(r.Messages))}
	if b.Schema == "" {
		b.Schema = "json"
	}
	for i, lm := range r.Messages {
		if lm == nil {
			return SourceLine{}, fmt.Errorf("message %d is null", i)
		}
		pm, err := lm.protoMessage()
		if err != nil {
			return SourceLine{}, fmt.Errorf("message %d: %w", i, err)
		}
		if pm.TimestampUs != 0 || pm.Offset != 0 {
			pm.TimestampUs, pm.Offset = 0, 0 // Iggy's to set
		}
		b.Messages[i] = pm
	}
	if len(r.State) > 0 && !bytes.Equal(r.State, []byte("null")) {
		var c bytes.Buffer
		_ = json.Compact(&c, r.State) // valid: decoded above
		b.State = c.Bytes()
	}
	return SourceLine{Batch: b}, nil
}

// decodeLine decodes one JSON object with a type.
func decodeLine(line []byte, v any) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return fmt.Errorf("not a JSON object: %s", quoteLine(line))
	}
	d := json.NewDecoder(bytes.NewReader(line))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not protocol JSON (%v): %s", err, quoteLine(line))
	}
	if d.More() {
		return fmt.Errorf("more than one JSON value on a line: %s", quoteLine(line))
	}
	var h lineHead
	_ = json.Unmarshal(line, &h)
	if h.Type == "" {
		return fmt.Errorf(`a line without a "type": %s`, quoteLine(line))
	}
	return nil
}

// quoteLine is the start of a line, for an error.
func quoteLine(b []byte) string {
	const max = 120
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}
