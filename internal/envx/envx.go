// Package envx decides which variables of the runtime's environment a
// program Ferry starts may see: the exec sink's commands (everything but
// Ferry's and Iggy's secrets) and plugins (an allowlist).
package envx

import (
	"errors"
	"strings"
)

// Withheld reports whether a variable of the runtime's environment is one
// of Ferry's or Iggy's secrets (or Ferry's own settings), which started
// programs do not get unless named: IGGY_CONNECTORS_* (the runtime's
// configuration, with connector credentials and the API key),
// IGGY_PASSWORD, IGGY_TOKEN, IGGY_ROOT_PASSWORD and FERRY_* (FERRY_API_KEY,
// and the names the exec sink's placeholders use).
func Withheld(name string) bool {
	switch name {
	case "IGGY_PASSWORD", "IGGY_TOKEN", "IGGY_ROOT_PASSWORD":
		return true
	}
	return strings.HasPrefix(name, "IGGY_CONNECTORS_") || strings.HasPrefix(name, "FERRY_")
}

// WithoutSecrets is the part of environ ("NAME=value" entries) that is
// not Withheld, except the withheld variables pass names.
func WithoutSecrets(environ, pass []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if Withheld(name) && !Matches(pass, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Only is the part of environ whose names allow names.
func Only(environ, allow []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if Matches(allow, name) {
			out = append(out, kv)
		}
	}
	return out
}

// Matches reports whether one of patterns names name: exactly, or by a
// prefix ending in "*" ("*" alone matches everything).
func Matches(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// CheckPattern checks one pattern: a variable name, or a prefix followed
// by "*" ("*" alone too).
func CheckPattern(p string) error {
	name := strings.TrimSuffix(p, "*")
	if p == "*" {
		return nil
	}
	if name == "" || strings.ContainsAny(name, "=*\x00") {
		return errors.New(`want a variable name such as "DATABASE_URL", or a prefix ending in "*" such as "IGGY_CONNECTORS_SINK_X_*"`)
	}
	return nil
}

// ValidName reports whether name is a portable environment variable name:
// a letter or '_', then letters, digits and '_'.
func ValidName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
