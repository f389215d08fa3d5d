package config

import (
	"bytes"
	"strings"
)

// locate finds the line of the key at target in a TOML document, for error
// messages. It understands [table] and [[array]] headers and dotted keys;
// when the key itself is not written in the file (a missing key), it gives
// the line of the table that should hold it. It returns 0 when unsure.
func locate(src []byte, target path) int {
	if len(src) == 0 || len(target) == 0 {
		return 0
	}
	want := target.String()
	var (
		cur       path
		counters  = map[string]int{} // resolved array-table path -> elements seen
		tableLine int                // line of the header of the target's table
		inString  string             // the multi-line string delimiter we are in
		found     int
	)
	lines := bytes.Split(src, []byte("\n"))
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSpace(string(raw))
		if inString != "" {
			if strings.Count(line, inString)%2 == 1 {
				inString = ""
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[[") {
			parts := splitKey(strings.TrimSuffix(cutComment(line[2:]), "]]"))
			if parts == nil {
				continue
			}
			parent := resolve(parts[:len(parts)-1], counters)
			p := parent.key(parts[len(parts)-1])
			idx := counters[p.String()]
			counters[p.String()] = idx + 1
			cur = p.index(idx)
		} else if line[0] == '[' {
			parts := splitKey(strings.TrimSuffix(cutComment(line[1:]), "]"))
			if parts == nil {
				continue
			}
			cur = resolve(parts, counters)
		} else {
			eq := indexOutsideQuotes(line, '=')
			if eq < 0 {
				continue
			}
			parts := splitKey(line[:eq])
			if parts == nil {
				continue
			}
			full := cur
			for _, p := range parts {
				full = full.key(p)
			}
			fs := full.String()
			if fs == want || strings.HasPrefix(want, fs+".") || strings.HasPrefix(want, fs+"[") ||
				strings.HasPrefix(fs, want+".") {
				found = n
				break
			}
			rest := line[eq+1:]
			for _, d := range []string{`"""`, `'''`} {
				if strings.Count(rest, d)%2 == 1 {
					inString = d
				}
			}
			continue
		}
		cs := cur.String()
		if cs == want || strings.HasPrefix(cs, want+".") || strings.HasPrefix(cs, want+"[") {
			found = n
			break
		}
		if strings.HasPrefix(want, cs+".") || strings.HasPrefix(want, cs+"[") {
			tableLine = n
		}
	}
	if found > 0 {
		return found
	}
	return tableLine
}

// resolve turns header parts into a path, adding the current index of every
// prefix that is an array of tables.
func resolve(parts []string, counters map[string]int) path {
	var p path
	for _, part := range parts {
		p = p.key(part)
		if c, ok := counters[p.String()]; ok && c > 0 {
			p = p.index(c - 1)
		}
	}
	return p
}

// splitKey splits a dotted TOML key ("a.\"b.c\".d") into its parts; nil when
// it does not look like a key.
func splitKey(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var parts []string
	var b strings.Builder
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(b.String()))
			b.Reset()
		case c == ' ' || c == '\t':
		default:
			b.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(b.String()))
}

func cutComment(s string) string {
	if i := indexOutsideQuotes(s, '#'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func indexOutsideQuotes(s string, c byte) int {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch {
		case quote != 0:
			if s[i] == quote {
				quote = 0
			}
		case s[i] == '"' || s[i] == '\'':
			quote = s[i]
		case s[i] == c:
			return i
		}
	}
	return -1
}

// pluginConfigOrigins says where each key of a plugin_config was set: its
// line in src (nil src: no lines), and the variable that set it (from
// the overrides' set, keyed by "plugin_config.<key>"). Keys are paths
// within the table; "" is the table itself.
func pluginConfigOrigins(src []byte, pc map[string]any, set map[string]string) (map[string]int, map[string]string) {
	lines := keyLines(src, path{"plugin_config"}, pc)
	var vars map[string]string
	for k, name := range set {
		if rest, ok := strings.CutPrefix(k, "plugin_config."); ok {
			if vars == nil {
				vars = map[string]string{}
			}
			vars[rest] = name
		}
	}
	return lines, vars
}

// keyLines are the lines in src of the keys of t, the table at root, by
// key path within it ("" is the table itself); nil when src is.
func keyLines(src []byte, root path, t map[string]any) map[string]int {
	if src == nil || t == nil {
		return nil
	}
	lines := map[string]int{}
	var walk func(p path, v any)
	walk = func(p path, v any) {
		if n := locate(src, append(root[:len(root):len(root)], p...)); n > 0 {
			lines[p.String()] = n
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(p.key(k), e)
			}
		case []any:
			for i, e := range x {
				walk(p.index(i), e)
			}
		}
	}
	walk(path{}, t)
	return lines
}
