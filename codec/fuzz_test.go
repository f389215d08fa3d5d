package codec

import (
	"bytes"
	"os"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// fuzzDecoder feeds arbitrary bytes to a codec's decoder: it must return
// an error or JSON that encodes back to a payload that decodes the same.
func fuzzDecoder(f *testing.F, c Codec, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		verr := c.Validate(p)
		j, err := c.ToJSON(nil, p)
		if (verr == nil) != (err == nil) {
			t.Fatalf("Validate: %v, ToJSON: %v", verr, err)
		}
		if err != nil {
			return
		}
		b, err := c.FromJSON(nil, j)
		if err != nil {
			t.Fatalf("FromJSON of ToJSON output %s: %v", j, err)
		}
		j2, err := c.ToJSON(nil, b)
		if err != nil {
			t.Fatalf("ToJSON of re-encoded %x: %v", b, err)
		}
		if !bytes.Equal(j, j2) {
			t.Fatalf("round trip changed the JSON:\n%s\n%s", j, j2)
		}
	})
}

func FuzzAvroDecode(f *testing.F) {
	c := mustNew(f, connector.SchemaAvro, avroOpts())
	seed, _ := c.FromJSON(nil, []byte(eventAvro))
	fuzzDecoder(f, c, seed, seed[:len(seed)/2], []byte{0x02})
}

func FuzzProtoDecode(f *testing.F) {
	c := mustNew(f, connector.SchemaProto, protoOpts())
	seed, _ := c.FromJSON(nil, []byte(eventProto))
	fuzzDecoder(f, c, seed, seed[:len(seed)/2], []byte{0x08, 0x01})
}

func FuzzProtoAnyDecode(f *testing.F) {
	fuzzDecoder(f, mustNew(f, connector.SchemaProto, Options{}), []byte("\x0a\x03a/b\x12\x01x"))
}

func FuzzFlatBufferDecode(f *testing.F) {
	c := mustNew(f, connector.SchemaFlatBuffer, fbOpts())
	bin, _ := os.ReadFile("testdata/event.bin")
	fuzzDecoder(f, c, bin, bin[:len(bin)/2], []byte{8, 0, 0, 0, 4, 0, 4, 0, 4, 0, 0, 0})
}

// FuzzFromJSON feeds arbitrary documents to every encoder: an error or a
// payload that validates.
func FuzzFromJSON(f *testing.F) {
	codecs := []Codec{
		mustNew(f, connector.SchemaAvro, avroOpts()),
		mustNew(f, connector.SchemaProto, protoOpts()),
		mustNew(f, connector.SchemaFlatBuffer, fbOpts()),
		mustNew(f, connector.SchemaProto, Options{}),
	}
	ev, _ := os.ReadFile("testdata/event.json")
	for _, s := range []string{eventAvro, eventProto, string(ev), `{}`, `[]`, `{"id":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, c := range codecs {
			b, err := c.FromJSON(nil, doc)
			if err != nil {
				continue
			}
			if err := c.Validate(b); err != nil {
				t.Fatalf("%s: FromJSON(%s) made a payload that does not validate: %v", c.Schema(), doc, err)
			}
		}
	})
}

// FuzzBFBS feeds arbitrary bytes to the .bfbs schema reader, and uses any
// schema it accepts to read and write a buffer.
func FuzzBFBS(f *testing.F) {
	for _, name := range []string{"testdata/event.bfbs", "testdata/bench.bfbs"} {
		b, _ := os.ReadFile(name)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	bin, _ := os.ReadFile("testdata/event.bin")
	doc, _ := os.ReadFile("testdata/event.json")
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := parseBFBS(schema, "")
		if err != nil {
			return
		}
		c := &fbCodec{s: s}
		_, _ = c.ToJSON(nil, bin)
		if out, err := c.FromJSON(nil, doc); err == nil {
			if _, err := c.ToJSON(nil, out); err != nil && !bytes.Contains([]byte(err.Error()), []byte("FlatBuffer")) {
				t.Logf("re-read: %v", err)
			}
		}
	})
}
