package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/plugin/pluginpb"
)

func TestReadLine(t *testing.T) {
	t.Parallel()
	r := bufio.NewReaderSize(strings.NewReader("a\r\n"+strings.Repeat("x", 40)+"\n"+strings.Repeat("y", 41)+"\nlast"), 16)
	for i, want := range []string{"a", strings.Repeat("x", 40)} {
		got, err := ReadLine(r, 40)
		if err != nil || string(got) != want {
			t.Fatalf("line %d: %q %v", i, got, err)
		}
	}
	if _, err := ReadLine(r, 40); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a line of 41 bytes with a bound of 40: %v", err)
	}
	r = bufio.NewReader(strings.NewReader("last"))
	if got, err := ReadLine(r, 40); err != nil || string(got) != "last" {
		t.Fatalf("a last line without a newline: %q %v", got, err)
	}
	if _, err := ReadLine(r, 40); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

func TestDecodeResult(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{`{"type":"result","seq":1,"ok":true}`, true},
		{`{"type":"result","seq":1,"failed":[{"index":0,"kind":"permanent","reason":"x"}]}`, true},
		{`{"type":"result","seq":1,"ok":false,"failed":[{"index":0}]}`, true},
		{`{"type":"result","seq":1,"error":"down"}`, true},
		{`{"type":"result","seq":1,"error":{"kind":"unavailable","reason":"down"}}`, true},
		{`{"type":"result","seq":1}`, false},
		{`{"type":"result","ok":true}`, false},
		{`{"type":"result","seq":1,"ok":true,"error":"x"}`, false},
		{`{"type":"result","seq":1,"failed":[{"kind":"retry"}]}`, false},
		{`{"type":"result","seq":1,"failed":[{"index":-1}]}`, false},
		{`{"type":"result","seq":1,"failed":[{"index":0,"kind":"soon"}]}`, false},
		{`{"type":"ack","seq":1}`, false},
		{`{"type":"result","seq":1,"ok":true} {}`, false},
		{`[1]`, false},
		{``, false},
	} {
		_, _, err := DecodeResult([]byte(c.line))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.line, err)
		}
	}
}

func TestSinkBatchLineRoundTrip(t *testing.T) {
	t.Parallel()
	req := &pluginpb.ConsumeRequest{Stream: "s", Schema: "json", Messages: []*pluginpb.Message{
		{Id: bytes.Repeat([]byte{7}, 16), Payload: []byte(`{"a": [1, 2]}`), Headers: []*pluginpb.Header{
			{Key: []byte("s"), KeyKind: 2, Kind: 2, Value: []byte("v")},
			{Key: []byte("u"), KeyKind: 2, Kind: 12, Value: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
			{Key: []byte("r"), KeyKind: 2, Kind: 1, Value: []byte{0xff}},
		}},
	}}
	line := SinkBatchLine(3, req)
	want := `{"type":"batch","seq":3,"stream":"s","topic":"","partition":0,"schema":"json","messages":[{"id":"07070707-0707-0707-0707-070707070707","payload":{"a":[1,2]},"headers":{"r":{"kind":"raw","base64":"/w=="},"s":"v","u":1},"offset":0}]}` + "\n"
	if string(line) != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	// The same batch as a source would write it.
	src := strings.Replace(string(line), `"seq":3`, `"seq":3,"state":[1]`, 1)
	sl, err := DecodeSourceLine([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m := sl.Batch.Messages[0]
	if string(m.Payload) != `{"a":[1,2]}` || len(m.Headers) != 3 || string(sl.Batch.State) != "[1]" || sl.Batch.Seq != 3 {
		t.Fatalf("decoded %+v", sl.Batch)
	}
	if _, err := MessagesFromProto(sl.Batch.Messages); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeSourceLineRefuses(t *testing.T) {
	t.Parallel()
	for _, l := range []string{
		`{"type":"batch","messages":[{}]}`,
		`{"type":"batch","messages":[{"payload":1,"payload_text":"1"}]}`,
		`{"type":"batch","messages":[{"payload_base64":"!!"}]}`,
		`{"type":"batch","messages":[{"id":"nope","payload":1}]}`,
		`{"type":"batch","messages":[{"payload":1,"headers":{"h":[1]}}]}`,
		`{"type":"batch","messages":[{"payload":1,"headers":{"h":{"kind":"int9","base64":""}}}]}`,
		`{"type":"batch","schema":"xml","messages":[]}`,
		`{"type":"batch","messages":[null]}`,
		`{"type":"hello"}`,
		`{"type":"error","kind":"soon"}`,
		`Hello`,
	} {
		if _, err := DecodeSourceLine([]byte(l)); err == nil {
			t.Errorf("%s: decoded", l)
		}
	}
}

// FuzzDecodeResult and FuzzDecodeSourceLine: no line panics a decoder,
// and what decodes converts to the connector's types or fails cleanly.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{"type":"result","seq":1,"ok":true}`, `{"type":"result","seq":2,"failed":[{"index":0,"kind":"retry","reason":"r"}]}`,
		`{"type":"result","seq":1,"error":{"kind":"unavailable"}}`, `{"type":"result","seq":1,"failed":[{"index":4294967296}]}`, `{"type":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		_, resp, err := DecodeResult(line)
		if err == nil && resp == nil {
			t.Fatal("no answer and no error")
		}
	})
}

func FuzzDecodeSourceLine(f *testing.F) {
	for _, s := range []string{`{"type":"batch","schema":"text","state":{"n":1},"messages":[{"payload_text":"a","headers":{"n":3,"f":1.5,"b":true,"r":{"kind":"uint128","base64":"AAAAAAAAAAAAAAAAAAAAAA=="}}}]}`,
		`{"type":"batch","messages":[{"id":"01020304-0506-0708-090a-0b0c0d0e0f10","payload":{"a":1}}]}`,
		`{"type":"end"}`, `{"type":"error","reason":"x"}`, `{"type":"batch","messages":[{"payload_base64":"eHl6"}],"state":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		sl, err := DecodeSourceLine(line)
		if err != nil || sl.Batch == nil {
			return
		}
		_, _ = MessagesFromProto(sl.Batch.Messages)
		_ = SinkBatchLine(1, &pluginpb.ConsumeRequest{Schema: sl.Batch.Schema, Messages: sl.Batch.Messages})
	})
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), 3)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for range len(data) + 1 {
			l, err := ReadLine(r, max)
			if err != nil {
				return
			}
			if len(l) > max {
				t.Fatalf("a line of %d bytes with a bound of %d", len(l), max)
			}
		}
	})
}

func TestManifestOfALinePlugin(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest("/p/ferry-plugin.toml", []byte("name = \"s\"\nkind = \"sink\"\ncommand = \"./s.sh\"\ntransport = \"lines\"\n[limits]\nmax_line = \"1MiB\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.SpecFromCall || m.Spec == nil || len(m.Spec.Fields) != 0 || m.Limits.MaxLine != 1<<20 {
		t.Fatalf("manifest %+v", m)
	}
	_, err = ParseManifest("/p/ferry-plugin.toml", []byte("name = \"s\"\nkind = \"sink\"\ncommand = \"./s.sh\"\ntransport = \"lines\"\nspec = \"call\"\n"))
	if err == nil || !strings.Contains(err.Error(), "no Spec call") {
		t.Fatalf("spec = call on the line protocol: %v", err)
	}
}
