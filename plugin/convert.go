package plugin

import (
	"errors"
	"fmt"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// MessageToProto is m on the wire.
func MessageToProto(m *connector.Message) *pluginpb.Message {
	pm := &pluginpb.Message{Payload: m.Payload, Offset: m.Offset, Checksum: m.Checksum}
	if m.ID != ([16]byte{}) {
		pm.Id = m.ID[:]
	}
	if !m.OriginTimestamp.IsZero() {
		pm.OriginTimestampUs = m.OriginTimestamp.UnixMicro()
	}
	if !m.Timestamp.IsZero() {
		pm.TimestampUs = m.Timestamp.UnixMicro()
	}
	if len(m.Headers) > 0 {
		pm.Headers = make([]*pluginpb.Header, len(m.Headers))
		for i, h := range m.Headers {
			pm.Headers[i] = &pluginpb.Header{Key: h.Key.Data, KeyKind: pluginpb.HeaderKind(h.Key.Kind),
				Kind: pluginpb.HeaderKind(h.Value.Kind), Value: h.Value.Data}
		}
	}
	return pm
}

// MessageFromProto is a message from the wire; it fails on what no
// message can be (an id that is not 16 bytes, a header of an unknown
// kind or of the wrong size), which from a plugin means a broken plugin.
func MessageFromProto(pm *pluginpb.Message) (connector.Message, error) {
	var m connector.Message
	if pm == nil {
		return m, errors.New("an empty message")
	}
	switch len(pm.Id) {
	case 0:
	case 16:
		m.ID = [16]byte(pm.Id)
	default:
		return m, fmt.Errorf("an id of %d bytes (want 16, or none)", len(pm.Id))
	}
	m.Payload, m.Offset, m.Checksum = pm.Payload, pm.Offset, pm.Checksum
	if pm.OriginTimestampUs != 0 {
		m.OriginTimestamp = time.UnixMicro(pm.OriginTimestampUs).UTC()
	}
	if pm.TimestampUs != 0 {
		m.Timestamp = time.UnixMicro(pm.TimestampUs).UTC()
	}
	if len(pm.Headers) > 0 {
		m.Headers = make([]connector.Header, len(pm.Headers))
		for i, ph := range pm.Headers {
			h, err := headerFromProto(ph)
			if err != nil {
				return m, fmt.Errorf("header %d: %w", i, err)
			}
			m.Headers[i] = h
		}
	}
	return m, nil
}

func headerFromProto(ph *pluginpb.Header) (connector.Header, error) {
	if ph == nil {
		return connector.Header{}, errors.New("empty")
	}
	kk := header.Kind(ph.KeyKind)
	switch kk {
	case 0:
		kk = header.KindString
	case header.KindString, header.KindRaw:
	default:
		return connector.Header{}, fmt.Errorf("key kind %d (want string or raw)", ph.KeyKind)
	}
	vk := header.Kind(ph.Kind)
	if vk == 0 {
		vk = header.KindString
	}
	if vk > header.KindFloat64 {
		return connector.Header{}, fmt.Errorf("value kind %d is not an Iggy header type", ph.Kind)
	}
	if n := vk.FixedSize(); n != 0 && len(ph.Value) != n {
		return connector.Header{}, fmt.Errorf("a %s value of %d bytes (want %d)", vk, len(ph.Value), n)
	}
	return connector.Header{Key: header.Key{Kind: kk, Data: ph.Key}, Value: header.Value{Kind: vk, Data: ph.Value}}, nil
}

// MessagesFromProto converts a list of messages, naming the first bad one.
func MessagesFromProto(pms []*pluginpb.Message) ([]connector.Message, error) {
	out := make([]connector.Message, len(pms))
	for i, pm := range pms {
		m, err := MessageFromProto(pm)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}

// MessagesToProto converts a list of messages.
func MessagesToProto(ms []connector.Message) []*pluginpb.Message {
	out := make([]*pluginpb.Message, len(ms))
	for i := range ms {
		out[i] = MessageToProto(&ms[i])
	}
	return out
}

// CheckSchema reports whether s is a schema a batch may name ("" is JSON).
func CheckSchema(s string) error {
	switch connector.Schema(s) {
	case "", connector.SchemaJSON, connector.SchemaRaw, connector.SchemaText, connector.SchemaProto,
		connector.SchemaAvro, connector.SchemaFlatBuffer:
		return nil
	}
	return fmt.Errorf("schema %q is not one of json, raw, text, proto, avro, flatbuffer", s)
}

// FailureError is a Failure as the error connector.Sink's contract
// speaks: marked Permanent or Unavailable, or unmarked (retry).
func FailureError(f *pluginpb.Failure) error {
	if f == nil {
		return nil
	}
	reason := f.Reason
	if reason == "" {
		reason = "the plugin gave no reason"
	}
	err := errors.New(reason)
	switch f.Kind {
	case pluginpb.FailureKind_FAILURE_KIND_PERMANENT:
		return connector.Permanent(err)
	case pluginpb.FailureKind_FAILURE_KIND_UNAVAILABLE:
		return connector.Unavailable(err)
	}
	return err
}

// FailureOf is err as a Failure: its kind from its marks.
func FailureOf(err error) *pluginpb.Failure {
	if err == nil {
		return nil
	}
	return &pluginpb.Failure{Kind: KindOf(err), Reason: err.Error()}
}

// KindOf is the FailureKind of an error's marks.
func KindOf(err error) pluginpb.FailureKind {
	switch {
	case connector.IsUnavailable(err):
		return pluginpb.FailureKind_FAILURE_KIND_UNAVAILABLE
	case connector.IsPermanent(err):
		return pluginpb.FailureKind_FAILURE_KIND_PERMANENT
	}
	return pluginpb.FailureKind_FAILURE_KIND_RETRY
}
