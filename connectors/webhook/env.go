package webhook

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} with the environment variable NAME; "$${" is a
// literal "${". A variable that is not set is an error naming it, never
// a value.
func expand(s string, getenv func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("a ${ has no closing }")
		}
		name := s[i+2 : i+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} is not a variable name (letters, digits and _)", name)
		}
		v, ok := getenv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set in the runtime's environment (set it where ferry run starts)", name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		if !(r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}
