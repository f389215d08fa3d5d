package plugin

import (
	"errors"

	"github.com/ferryhq/ferry/internal/envx"
)

// BaseEnv are the variables of the runtime's environment every plugin
// sees: names, or prefixes ending in "*".
var BaseEnv = []string{"PATH", "HOME", "LANG", "LC_*", "TZ", "TMPDIR", "USER", "LOGNAME"}

// CheckEnvPattern checks one entry of a manifest's env: a variable name,
// or a prefix followed by "*". "*" alone is refused: a plugin's
// environment is an allowlist.
func CheckEnvPattern(p string) error {
	if p == "*" {
		return errors.New(`"*" would pass the whole environment, secrets included; name the variables`)
	}
	return envx.CheckPattern(p)
}

// Environ is the environment a plugin with m gets from environ (the
// runtime's): BaseEnv and the variables m.Env names, nothing else. So
// Ferry's and Iggy's secrets (IGGY_CONNECTORS_*, IGGY_PASSWORD, FERRY_*
// …) reach a plugin only when its manifest names them.
func Environ(m *Manifest, environ []string) []string {
	return envx.Only(environ, append(append([]string(nil), BaseEnv...), m.Env...))
}
