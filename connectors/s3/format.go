package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// Output formats, as upstream names them, with their file extensions.
const (
	formatJSONLines = "json_lines"
	formatJSONArray = "json_array"
	formatRaw       = "raw"
)

var extensions = map[string]string{formatJSONLines: "jsonl", formatJSONArray: "json", formatRaw: "bin"}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

var placeholders = map[string]bool{"{stream}": true, "{topic}": true, "{partition}": true,
	"{date}": true, "{hour}": true, "{timestamp}": true}

// checkTemplate accepts upstream's placeholders and literal text that
// makes safe key segments.
func checkTemplate(v any) error {
	s, _ := v.(string)
	for _, p := range placeholder.FindAllString(s, -1) {
		if !placeholders[p] {
			return fmt.Errorf("unknown placeholder %s (have {stream} {topic} {partition} {date} {hour} {timestamp})", p)
		}
	}
	if strings.ContainsAny(placeholder.ReplaceAllString(s, ""), "{}") {
		return fmt.Errorf("unbalanced braces in %q", s)
	}
	return checkLiteralPath(s)
}

// checkLiteralPath refuses path segments "." and ".." and control
// characters in a configured prefix or template.
func checkLiteralPath(s string) error {
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%q has a %q segment", s, seg)
		}
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q holds a control character", s)
		}
	}
	return nil
}

func checkPrefix(v any) error { s, _ := v.(string); return checkLiteralPath(s) }

// escapeSegment makes a stream or topic name one safe key segment:
// letters, digits, '_', '-' and '.' stay, every other byte becomes %XX
// ('/' and '%' included), and "." and ".." are escaped whole, so a name
// can neither add a level nor climb one.
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	switch out := b.String(); out {
	case "":
		return "%00" // no name: still one segment
	case ".", "..":
		return strings.ReplaceAll(out, ".", "%2E")
	default:
		return out
	}
}

// keyDir renders prefix and template for a unit whose first message is
// first: every value is Ferry's own (escaped names, numbers, dates from
// the broker's timestamp), nothing from a payload.
func (s *Sink) keyDir(b *connector.SinkBatch, first *connector.Message) string {
	ts := first.Timestamp.UTC()
	r := strings.NewReplacer("{stream}", escapeSegment(b.Stream), "{topic}", escapeSegment(b.Topic),
		"{partition}", strconv.FormatUint(uint64(b.Partition), 10),
		"{date}", ts.Format("2006-01-02"), "{hour}", ts.Format("15"),
		"{timestamp}", strconv.FormatInt(ts.UnixMilli(), 10))
	dir := strings.Trim(r.Replace(s.template), "/")
	if s.prefix != "" {
		dir = s.prefix + "/" + dir
	}
	return dir
}

// objectName is the last segment of an object's key: its offset range
// (upstream's "{:06}-{:06}.ext").
func (s *Sink) objectName(first, last uint64) string {
	return fmt.Sprintf("%s%06d.%s", startName(first), last, extensions[s.format])
}

// startName is what every object starting at offset first begins with.
func startName(first uint64) string { return fmt.Sprintf("%06d-", first) }

// record is one message as the output format writes it (without the
// line end or array comma).
func (s *Sink) record(buf *bytes.Buffer, b *connector.SinkBatch, m *connector.Message) {
	if s.format == formatRaw {
		buf.Write(m.Payload)
		return
	}
	buf.WriteByte('{')
	if s.includeMetadata {
		fmt.Fprintf(buf, `"offset":%d,"timestamp":%s,"stream":%s,"topic":%s,"partition_id":%d,`,
			m.Offset, quote(m.Timestamp.UTC().Truncate(time.Second).Format(time.RFC3339)),
			quote(b.Stream), quote(b.Topic), b.Partition)
	}
	if s.includeHeaders && len(m.Headers) > 0 {
		buf.WriteString(`"headers":{`)
		for i, h := range m.Headers {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(quote(h.Key.String()))
			buf.WriteByte(':')
			buf.WriteString(quote(h.Value.String()))
		}
		buf.WriteString("},")
	}
	buf.WriteString(`"payload":`)
	payloadJSON(buf, b.Schema, m.Payload)
	buf.WriteByte('}')
}

// payloadJSON writes a payload as a JSON value, as upstream does: JSON
// as it is (compacted, so that it stays on one line), text as a string,
// other bytes as JSON when they parse and base64 otherwise.
func payloadJSON(buf *bytes.Buffer, schema connector.Schema, p []byte) {
	switch schema {
	case connector.SchemaText, connector.SchemaProto:
		buf.WriteString(quote(string(p)))
		return
	case connector.SchemaAvro, connector.SchemaFlatBuffer:
	default:
		if json.Valid(p) {
			_ = json.Compact(buf, p)
			return
		}
	}
	buf.WriteString(quote(base64.StdEncoding.EncodeToString(p)))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
