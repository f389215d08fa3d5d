package codec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/ferryhq/ferry/connector"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// protoCodec reads and writes protobuf messages of one type, compiled from
// a .proto file at start-up (no protoc). Without a message type, payloads
// are google.protobuf.Any messages mapped to {"type_url": ..., "value":
// base64}, as upstream's decoder reads them.
//
// The JSON mapping is proto3's canonical one with the .proto field names,
// except that 64-bit integers are JSON numbers (not strings), so that a
// JSON record keeps its types through a protobuf stream. Fields without
// presence are written even when zero; reading accepts both field-name
// forms, numbers or strings for integers, and enum names or numbers.
type protoCodec struct {
	md     protoreflect.MessageDescriptor // nil in Any mode
	strict bool
}

func newProto(o Options) (Codec, error) {
	c := &protoCodec{strict: o.StrictJSON}
	var find func(string) (protoreflect.MessageDescriptor, error)
	switch {
	case o.ProtoSchemaPath != "":
		files, err := compileProto(o)
		if err != nil {
			return nil, err
		}
		find = func(name string) (protoreflect.MessageDescriptor, error) {
			if d, err := files.AsResolver().FindDescriptorByName(protoreflect.FullName(name)); err == nil {
				if md, isMsg := d.(protoreflect.MessageDescriptor); isMsg {
					return md, nil
				}
			}
			return findMessage(name, files[0].Messages())
		}
	case len(o.ProtoDescriptorSet) > 0:
		var set descriptorpb.FileDescriptorSet
		if err := proto.Unmarshal(o.ProtoDescriptorSet, &set); err != nil {
			return nil, fmt.Errorf("descriptor_set: not a FileDescriptorSet: %w", err)
		}
		files, err := protodesc.NewFiles(&set)
		if err != nil {
			return nil, fmt.Errorf("descriptor_set: %w", err)
		}
		find = func(name string) (protoreflect.MessageDescriptor, error) {
			if d, err := files.FindDescriptorByName(protoreflect.FullName(name)); err == nil {
				if md, isMsg := d.(protoreflect.MessageDescriptor); isMsg {
					return md, nil
				}
			}
			var found []protoreflect.MessageDescriptor
			files.RangeFiles(func(f protoreflect.FileDescriptor) bool {
				if md, err := findMessage(name, f.Messages()); err == nil {
					found = append(found, md)
				}
				return true
			})
			if len(found) == 1 {
				return found[0], nil
			}
			return nil, fmt.Errorf("descriptor set has %d messages named %q", len(found), name)
		}
	default:
		if o.ProtoMessage != "" {
			return nil, errors.New("proto_message_type is set without a schema path")
		}
		return c, nil
	}
	if o.ProtoMessage == "" {
		return nil, errors.New("proto_message_type: required with a .proto schema (the message type to read, such as \"shop.Order\")")
	}
	md, err := find(o.ProtoMessage)
	if err != nil {
		return nil, fmt.Errorf("proto_message_type: %w", err)
	}
	c.md = md
	return c, nil
}

func compileProto(o Options) (linker.Files, error) {
	file := o.path(o.ProtoSchemaPath)
	paths := []string{filepath.Dir(file)}
	for _, p := range o.ProtoIncludePaths {
		paths = append(paths, o.path(p))
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: paths}),
	}
	files, err := comp.Compile(context.Background(), filepath.Base(file))
	if err != nil {
		return nil, fmt.Errorf("proto_schema_path %s: %w", file, err)
	}
	return files, nil
}

// findMessage looks a message up by simple or dotted name among ms and
// their nested messages; the name must be unique.
func findMessage(name string, ms protoreflect.MessageDescriptors) (protoreflect.MessageDescriptor, error) {
	var found []protoreflect.MessageDescriptor
	var walk func(ms protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			full := string(m.FullName())
			if full == name || string(m.Name()) == name || strings.HasSuffix(full, "."+name) {
				found = append(found, m)
			}
			walk(m.Messages())
		}
	}
	walk(ms)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no message %q in the schema", name)
	}
	return nil, fmt.Errorf("%q names %d messages; use the full name (such as %q)", name, len(found), found[0].FullName())
}

func (c *protoCodec) Schema() connector.Schema { return connector.SchemaProto }
func (c *protoCodec) Mapped() bool             { return true }

func (c *protoCodec) newMessage() proto.Message {
	if c.md == nil {
		return &anypb.Any{}
	}
	return dynamicpb.NewMessage(c.md)
}

func (c *protoCodec) decode(p []byte) (proto.Message, error) {
	m := c.newMessage()
	if err := proto.Unmarshal(p, m); err != nil {
		return nil, fmt.Errorf("payload is not a protobuf %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return m, nil
}

func (c *protoCodec) Validate(p []byte) error {
	_, err := c.decode(p)
	return err
}

func (c *protoCodec) ToJSON(dst, p []byte) ([]byte, error) {
	m, err := c.decode(p)
	if err != nil {
		return nil, err
	}
	if c.md == nil {
		return appendAnyJSON(dst, m.(*anypb.Any)), nil
	}
	if dst == nil {
		dst = make([]byte, 0, 2*len(p)+16)
	}
	return appendProtoJSON(dst, m.ProtoReflect(), 0)
}

func (c *protoCodec) FromJSON(dst, doc []byte) ([]byte, error) {
	if c.md == nil {
		a, err := parseAnyJSON(doc)
		if err != nil {
			return nil, err
		}
		return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, a)
	}
	m := c.newMessage()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: !c.strict}).Unmarshal(doc, m); err != nil {
		return nil, fmt.Errorf("JSON does not match protobuf %s: %w", c.md.FullName(), err)
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}
