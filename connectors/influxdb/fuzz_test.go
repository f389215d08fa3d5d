package influxdb

import (
	"strings"
	"testing"
)

// split1_8 splits s at the separators InfluxDB 1.8's tag scanner takes
// as unescaped: sep not preceded by a backslash (models/points.go).
func split18(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == sep && (i == 0 || s[i-1] != '\\') {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unescape18 is 1.8's unescapeTag: the pairs \, \space \= become the
// character; every other backslash stays.
func unescape18(s string) string {
	return strings.NewReplacer(`\,`, ",", `\ `, " ", `\=`, "=").Replace(s)
}

// Any name checkName accepts, written as a tag key and a tag value, is
// read back unchanged by 1.8's scanning and unescaping rules; a name it
// refuses is never written. The real server's round trip is
// TestHostileNamesAndPayloads.
func FuzzNameEscaping(f *testing.F) {
	for _, s := range []string{"a", "a b", "a,b=c", `a\b`, `\x\,y`, `end\`, "tab\tx", "ü", `\ `, "#c", `"q"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkName(s) != nil {
			return
		}
		line := string(appendName([]byte("m,"), s, keyName)) + "=" + string(appendName(nil, s, keyName))
		// The tag section ends at the first unescaped space.
		tags := split18(line, ' ')[0]
		parts := split18(tags, ',')
		if len(parts) != 2 {
			t.Fatalf("%q: %d tag-section parts in %q", s, len(parts), tags)
		}
		kv := split18(parts[1], '=')
		if len(kv) != 2 {
			t.Fatalf("%q: key and value do not split in %q", s, parts[1])
		}
		if unescape18(kv[0]) != s || unescape18(kv[1]) != s {
			t.Fatalf("%q read back as key %q, value %q from %q", s, unescape18(kv[0]), unescape18(kv[1]), line)
		}
	})
}

// A string field value ends at the first quote not escaped (1.8's
// scanFieldValue) and unescapes \\ and \" back to what was written.
func FuzzStringEscaping(f *testing.F) {
	for _, s := range []string{"", `\`, `"`, `\"`, "a\nb", `x\\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := appendString(nil, s)
		var out []byte
		i := 1
		for ; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) && (v[i+1] == '"' || v[i+1] == '\\') {
				out = append(out, v[i+1])
				i++
				continue
			}
			if v[i] == '"' {
				break
			}
			out = append(out, v[i])
		}
		if i != len(v)-1 || string(out) != s {
			t.Fatalf("%q written as %s read back as %q (ended at %d of %d)", s, v, out, i, len(v))
		}
	})
}
