package config

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Environment variables read by the loader itself.
const (
	EnvConfigPath = "IGGY_CONNECTORS_CONFIG_PATH" // config.toml path when --config is not given
	EnvDotenvPath = "IGGY_CONNECTORS_ENV_PATH"    // a .env file to read before overrides
	envPrefix     = "IGGY_CONNECTORS_"
)

// Env is the environment the loader reads: a lookup function and,
// optionally, the list of variable names. The names are needed to inject
// new plugin_config fields (IGGY_CONNECTORS_*_PLUGIN_CONFIG_*) and to warn
// about unknown IGGY_CONNECTORS_* variables; without them overrides of
// existing keys still work. The zero Env is the process environment.
type Env struct {
	lookup func(string) (string, bool)
	names  func() []string
}

// OSEnv is the process environment.
func OSEnv() Env { return Env{lookup: os.LookupEnv, names: osNames} }

func osNames() []string {
	env := os.Environ()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok {
			out = append(out, k)
		}
	}
	return out
}

// MapEnv is an environment holding exactly m (for tests).
func MapEnv(m map[string]string) Env {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return Env{
		lookup: func(k string) (string, bool) { v, ok := c[k]; return v, ok },
		names: func() []string {
			out := make([]string, 0, len(c))
			for k := range c {
				out = append(out, k)
			}
			sort.Strings(out)
			return out
		},
	}
}

// EnvFunc is an environment read through lookup (such as os.LookupEnv);
// names may be nil.
func EnvFunc(lookup func(string) (string, bool), names func() []string) Env {
	return Env{lookup: lookup, names: names}
}

// Lookup returns the value of the variable k.
func (e Env) Lookup(k string) (string, bool) {
	if e.lookup == nil {
		return os.LookupEnv(k)
	}
	return e.lookup(k)
}

// Names lists the variable names, or nil when unknown.
func (e Env) Names() []string {
	if e.lookup == nil {
		return osNames()
	}
	if e.names == nil {
		return nil
	}
	return e.names()
}

// value returns a variable's value when set and not empty. Empty values
// count as unset, as upstream treats them.
func (e Env) value(k string) (string, bool) {
	v, ok := e.Lookup(k)
	return v, ok && v != ""
}

// withFallback returns e with the variables of file added under it: a
// variable set in e wins over the same variable in file, as with dotenv
// files everywhere.
func (e Env) withFallback(file map[string]string) Env {
	if len(file) == 0 {
		return e
	}
	return Env{
		lookup: func(k string) (string, bool) {
			if v, ok := e.Lookup(k); ok {
				return v, true
			}
			v, ok := file[k]
			return v, ok
		},
		names: func() []string {
			seen := map[string]bool{}
			var out []string
			for _, k := range e.Names() {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
			for k := range file {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
			sort.Strings(out)
			return out
		},
	}
}

// LoadDotenv reads a .env file: KEY=VALUE lines, optional "export ",
// '#' comments, single quotes (literal) and double quotes (with \n, \t,
// \r, \", \\ and \$ escapes; may span lines). There is no ${VAR}
// expansion.
func LoadDotenv(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read .env file: %w", err)
	}
	return ParseDotenv(file, data)
}

// ParseDotenv parses the contents of a .env file; name labels errors.
func ParseDotenv(name string, data []byte) (map[string]string, error) {
	out := map[string]string{}
	s := string(data)
	line := 1
	fail := func(msg string, args ...any) error {
		return &FieldError{File: name, Line: line, Msg: fmt.Sprintf(msg, args...)}
	}
	for len(s) > 0 {
		// one logical line
		s = strings.TrimLeft(s, " \t\r")
		if s == "" {
			break
		}
		if s[0] == '\n' {
			s, line = s[1:], line+1
			continue
		}
		if s[0] == '#' {
			s = skipLine(s)
			continue
		}
		if rest, ok := strings.CutPrefix(s, "export "); ok {
			s = strings.TrimLeft(rest, " \t")
		}
		i := 0
		for i < len(s) && isEnvKeyByte(s[i], i) {
			i++
		}
		if i == 0 {
			return nil, fail("expected KEY=VALUE, where KEY is letters, digits and '_' not starting with a digit")
		}
		key := s[:i]
		s = strings.TrimLeft(s[i:], " \t")
		if s == "" || s[0] != '=' {
			return nil, fail("expected '=' after %s", key)
		}
		s = strings.TrimLeft(s[1:], " \t")
		var val string
		var err error
		startLine := line
		switch {
		case s != "" && (s[0] == '\'' || s[0] == '"'):
			val, s, line, err = quotedValue(s, line)
			if err != nil {
				line = startLine
				return nil, fail("%s: %v", key, err)
			}
			rest := strings.TrimLeft(s, " \t\r")
			if rest != "" && rest[0] != '\n' && rest[0] != '#' {
				return nil, fail("%s: unexpected text after the closing quote", key)
			}
			s = skipLine(rest)
		default:
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				end = len(s)
			}
			val = s[:end]
			if j := strings.Index(val, " #"); j >= 0 {
				val = val[:j]
			}
			if j := strings.Index(val, "\t#"); j >= 0 {
				val = val[:j]
			}
			val = strings.TrimRight(val, " \t\r")
			s = s[end:]
		}
		out[key] = val
	}
	return out, nil
}

func skipLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i:]
	}
	return ""
}

func isEnvKeyByte(c byte, i int) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (i > 0 && (c >= '0' && c <= '9' || c == '.'))
}

// quotedValue reads a quoted value starting at s[0]; it returns the value,
// the rest after the closing quote, and the line count.
func quotedValue(s string, line int) (string, string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), s[i+1:], line, nil
		case c == '\\' && q == '"' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\', '$', '\'':
				b.WriteByte(s[i])
			case '\n':
				line++ // a line continuation
			default:
				b.WriteByte('\\')
				b.WriteByte(s[i])
			}
		default:
			if c == '\n' {
				line++
			}
			b.WriteByte(c)
		}
	}
	return "", "", line, fmt.Errorf("missing closing %c quote", q)
}
