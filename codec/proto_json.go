package codec

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/jsonx"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// appendProtoJSON writes a message as JSON (see protoCodec).
func appendProtoJSON(dst []byte, m protoreflect.Message, depth int) ([]byte, error) {
	if depth > maxNesting {
		return nil, errors.New("protobuf message nested too deeply")
	}
	md := m.Descriptor()
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		// Well-known types have their own JSON forms.
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m.Interface())
		if err != nil {
			return nil, err
		}
		return append(dst, b...), nil
	}
	dst = append(dst, '{')
	first := true
	fields := md.Fields()
	var err error
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonx.AppendString(dst, string(fd.Name()))
		dst = append(dst, ':')
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			dst = append(dst, '[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					dst = append(dst, ',')
				}
				if dst, err = appendProtoValue(dst, fd, l.Get(j), depth); err != nil {
					return nil, err
				}
			}
			dst = append(dst, ']')
		case fd.IsMap():
			if dst, err = appendProtoMap(dst, fd, v.Map(), depth); err != nil {
				return nil, err
			}
		default:
			if dst, err = appendProtoValue(dst, fd, v, depth); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, '}'), nil
}

func appendProtoMap(dst []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map, depth int) ([]byte, error) {
	type entry struct {
		k string
		v protoreflect.Value
	}
	entries := make([]entry, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		entries = append(entries, entry{k.String(), v})
		return true
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].k < entries[j].k })
	dst = append(dst, '{')
	var err error
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, e.k)
		dst = append(dst, ':')
		if dst, err = appendProtoValue(dst, fd.MapValue(), e.v, depth); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendProtoValue(dst []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(dst, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return appendProtoFloat(dst, v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return appendProtoFloat(dst, v.Float(), 64), nil
	case protoreflect.StringKind:
		return jsonx.AppendString(dst, v.String()), nil
	case protoreflect.BytesKind:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
		return append(dst, '"'), nil
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return append(dst, "null"...), nil
		}
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return jsonx.AppendString(dst, string(ev.Name())), nil
		}
		return strconv.AppendInt(dst, int64(v.Enum()), 10), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendProtoJSON(dst, v.Message(), depth+1)
	}
	return nil, fmt.Errorf("unsupported protobuf kind %s", fd.Kind())
}

// appendProtoFloat writes NaN and the infinities as protojson does.
func appendProtoFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendAnyJSON writes upstream's JSON form of a google.protobuf.Any.
func appendAnyJSON(dst []byte, a *anypb.Any) []byte {
	dst = append(dst, `{"type_url":`...)
	dst = jsonx.AppendString(dst, a.GetTypeUrl())
	dst = append(dst, `,"value":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, a.GetValue())
	return append(dst, `"}`...)
}

// parseAnyJSON reads {"type_url": ..., "value": base64}.
func parseAnyJSON(doc []byte) (*anypb.Any, error) {
	v, err := parseDoc(doc)
	if err != nil {
		return nil, err
	}
	bad := errors.New(`a protobuf Any payload needs a JSON object {"type_url": "...", "value": "<base64>"} (or set a .proto schema and message type)`)
	if v.Kind != jsonx.Object {
		return nil, bad
	}
	a := &anypb.Any{}
	if t, ok := v.Get("type_url"); ok {
		if t.Kind != jsonx.String {
			return nil, bad
		}
		a.TypeUrl = t.Str
	}
	if val, ok := v.Get("value"); ok {
		if val.Kind != jsonx.String {
			return nil, bad
		}
		if a.Value, err = base64.StdEncoding.DecodeString(val.Str); err != nil {
			return nil, fmt.Errorf("Any value is not base64: %w", err)
		}
	}
	return a, nil
}
