package codec

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestProtoRoundTrip(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaProto, protoOpts())
	b, err := c.FromJSON(nil, []byte(eventProto))
	require.NoError(t, err)
	require.NoError(t, c.Validate(b))
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, eventProto, string(out))

	// The protobuf library itself reads the same values back.
	md := c.(*protoCodec).md
	m := dynamicpb.NewMessage(md)
	require.NoError(t, proto.Unmarshal(b, m))
	get := func(name string) protoreflect.Value { return m.Get(md.Fields().ByName(protoreflect.Name(name))) }
	require.Equal(t, int64(9007199254740993), get("id").Int())
	require.Equal(t, uint64(18446744073709551615), get("big").Uint())
	require.Equal(t, "Grüße 😀", get("name").String())
	require.Equal(t, []byte{0, 1, 255}, get("blob").Bytes())
	require.Equal(t, protoreflect.EnumNumber(2), get("kind").Enum())
	require.Equal(t, 2, get("lines").List().Len())
}

func TestProtoJSONInputForms(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaProto, Options{ProtoSchemaPath: "event.proto", ProtoMessage: "Event", BaseDir: "testdata"})
	b, err := c.FromJSON(nil, []byte(`{"id":"12","kind":3,"address":{"city":"X"},"unknownField":1}`))
	require.NoError(t, err, "strings for int64, enum numbers, unknown fields ignored")
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, `{"id":12,"name":"","count":0,"score":0,"ratio":0,"active":false,"tags":[],"address":{"street":"","city":"X"},
"kind":"DELETED","attrs":{},"blob":"","big":0,"lines":[]}`, string(out))

	strict := mustNew(t, connector.SchemaProto, Options{ProtoSchemaPath: "testdata/event.proto", ProtoMessage: "Event", StrictJSON: true})
	_, err = strict.FromJSON(nil, []byte(`{"id":1,"unknownField":1}`))
	require.ErrorContains(t, err, "unknownField")
	_, err = c.FromJSON(nil, []byte(`{"id":"x"}`))
	require.ErrorContains(t, err, "JSON does not match protobuf ferry.test.Event")
	require.ErrorContains(t, c.Validate([]byte{0xff, 0xff}), "not a protobuf ferry.test.Event")
}

func TestProtoNestedMessageType(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaProto, Options{ProtoSchemaPath: "testdata/event.proto", ProtoMessage: "Event.Line"})
	b, err := c.FromJSON(nil, []byte(`{"sku":"A","qty":3}`))
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	require.Equal(t, `{"sku":"A","qty":3}`, string(out))
}

func TestProtoDescriptorSet(t *testing.T) {
	t.Parallel()
	files, err := (&protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{"testdata"}})}).Compile(context.Background(), "event.proto")
	require.NoError(t, err)
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		for i := 0; i < f.Imports().Len(); i++ {
			add(f.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(files[0])
	raw, err := proto.Marshal(set)
	require.NoError(t, err)
	c := mustNew(t, connector.SchemaProto, Options{ProtoDescriptorSet: raw, ProtoMessage: "ferry.test.Event"})
	b, err := c.FromJSON(nil, []byte(eventProto))
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	requireSameJSON(t, eventProto, string(out))
}

func TestProtoAnyMode(t *testing.T) {
	t.Parallel()
	c := mustNew(t, connector.SchemaProto, Options{})
	a := &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: []byte("Hello, World!")}
	b, err := proto.Marshal(a)
	require.NoError(t, err)
	out, err := c.ToJSON(nil, b)
	require.NoError(t, err)
	require.Equal(t, `{"type_url":"type.googleapis.com/google.protobuf.StringValue","value":"SGVsbG8sIFdvcmxkIQ=="}`, string(out))
	back, err := c.FromJSON(nil, out)
	require.NoError(t, err)
	require.Equal(t, b, back)
	require.NoError(t, c.Validate(nil), "an empty Any is a valid message")
	_, err = c.FromJSON(nil, []byte(`{"name":"x"}`))
	require.NoError(t, err, "an object without the Any members is an empty Any")
	_, err = c.FromJSON(nil, []byte(`[1]`))
	require.ErrorContains(t, err, "protobuf Any payload needs a JSON object")
}
