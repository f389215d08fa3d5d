package file

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// template is a sink path such as "out/{stream}/{topic}/{partition}.ndjson".
type template struct {
	parts       []tmplPart
	timeBased   bool // uses {date} or {hour}: the path may change per message
	connectorID string
}

type tmplPart struct {
	lit string
	ph  string // placeholder name, or "" for a literal
}

// placeholders a path template may use.
var placeholders = []string{"stream", "topic", "partition", "date", "hour", "key"}

func parseTemplate(s, key string) (template, error) {
	t := template{connectorID: key}
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			t.parts = append(t.parts, tmplPart{lit: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tmplPart{lit: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return template{}, fmt.Errorf("%q has a { without }", s)
		}
		name := s[i+1 : i+j]
		known := false
		for _, p := range placeholders {
			known = known || p == name
		}
		if !known {
			return template{}, fmt.Errorf("{%s} is not a placeholder (use {%s})", name, strings.Join(placeholders, "}, {"))
		}
		t.timeBased = t.timeBased || name == "date" || name == "hour"
		t.parts = append(t.parts, tmplPart{ph: name})
		s = s[i+j+1:]
	}
	return t, nil
}

// fixedDir is the directory every rendered path lies in: the directory
// of the literal text before the first placeholder ("." when the path
// starts with one).
func (t template) fixedDir() string {
	if len(t.parts) == 1 && t.parts[0].ph == "" {
		return t.parts[0].lit
	}
	if len(t.parts) == 0 || t.parts[0].ph != "" {
		return "."
	}
	return filepath.Dir(t.parts[0].lit + "x")
}

// render is the path for a message of b; ts is the message's broker
// timestamp (UTC is used), so a message delivered again lands in the same
// file.
func (t template) render(b *connector.SinkBatch, ts time.Time) string {
	var sb strings.Builder
	for _, p := range t.parts {
		switch p.ph {
		case "":
			sb.WriteString(p.lit)
		case "stream":
			sb.WriteString(pathSafe(b.Stream))
		case "topic":
			sb.WriteString(pathSafe(b.Topic))
		case "partition":
			sb.WriteString(strconv.FormatUint(uint64(b.Partition), 10))
		case "date":
			sb.WriteString(ts.UTC().Format("2006-01-02"))
		case "hour":
			sb.WriteString(ts.UTC().Format("15"))
		case "key":
			sb.WriteString(pathSafe(t.connectorID))
		}
	}
	return sb.String()
}

// pathSafe keeps a name from a message's stream or topic inside one path
// element: separators and NUL become "_", and "", "." and ".." become "_".
func pathSafe(s string) string {
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}
