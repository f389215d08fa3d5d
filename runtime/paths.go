package runtime

import (
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/apitoken"
)

// paths is where the runtime's connectors may read and write files: never
// in the runtime's own files (its configuration, the state directory with
// the embedded broker's data, the API's TLS key and local tokens), and
// only under [connectors] allowed_dirs when that is set. Without it, a
// file sink could write a connector file into config_dir and a restart
// would run it, or a file source could copy the runtime's secrets out.
func (r *Runtime) paths() connector.Paths {
	c := r.cfg
	p := connector.Paths{Allowed: c.Connectors.AllowedDirs}
	add := func(path, what string) {
		if path != "" {
			p.Protected = append(p.Protected, connector.ProtectedPath{Path: path, What: what})
		}
	}
	add(c.Connectors.ConfigDir, "connector configuration directory (config_dir)")
	add(c.File, "configuration file")
	if env, ok := c.Env().Lookup(config.EnvDotenvPath); ok {
		add(env, "environment file ("+config.EnvDotenvPath+")")
	}
	add(r.stateDir(), "state directory ([state] path)")
	add(c.HTTP.TLS.KeyFile, "API TLS key ([http.tls] key_file)")
	if dir, err := apitoken.Dir(); err == nil {
		add(dir, "API token directory")
	}
	return p
}
