package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Option changes how configurations are loaded.
type Option func(*options)

type options struct {
	env    Env
	envSet bool
	client *http.Client
	runDir string
}

// WithEnv sets the environment read for the config path, the .env path and
// the overrides. The default is the process environment.
func WithEnv(e Env) Option { return func(o *options) { o.env, o.envSet = e, true } }

// WithRunDir sets where a Store writes what is created at run time
// (versions created through the API, hooks, the active versions chosen):
// a directory of the runtime's state, so that config_dir, often a tracked
// folder, is only read. Default: config_dir itself, as upstream.
func WithRunDir(dir string) Option { return func(o *options) { o.runDir = dir } }

// WithHTTPClient sets the client the HTTP provider uses; the default is a
// new client with the configured timeout per request.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

func buildOptions(opts []Option) options {
	o := options{env: OSEnv()}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ConfigPath chooses the runtime config file: the --config flag value when
// not empty, else IGGY_CONNECTORS_CONFIG_PATH, else "" (no file).
func ConfigPath(flag string, env Env) string {
	if flag != "" {
		return flag
	}
	v, _ := env.value(EnvConfigPath)
	return v
}

// Load reads the runtime configuration: defaults, then the file (flag, or
// IGGY_CONNECTORS_CONFIG_PATH when flag is empty; none when both are
// empty), then the environment overrides, with the .env file named by
// IGGY_CONNECTORS_ENV_PATH read first. Relative paths in the file are made
// absolute against the file's directory. The error, if any, is an Errors
// list naming each problem's file, line, key and expectation.
func Load(flag string, opts ...Option) (*Runtime, error) {
	o := buildOptions(opts)
	env, err := withDotenv(o.env)
	if err != nil {
		return nil, err
	}
	file := ConfigPath(flag, env)
	var data []byte
	if file != "" {
		if data, err = os.ReadFile(file); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("config file %s does not exist: %w", file, err)
			}
			return nil, fmt.Errorf("read config file: %w", err)
		}
	}
	return parseRuntime(file, data, env)
}

// Parse reads a runtime configuration from data as if loaded from file
// (file names errors and anchors relative paths). The .env file is not
// read; overrides come from the WithEnv environment.
func Parse(file string, data []byte, opts ...Option) (*Runtime, error) {
	return parseRuntime(file, data, buildOptions(opts).env)
}

// withDotenv layers the .env file named by IGGY_CONNECTORS_ENV_PATH under
// env.
func withDotenv(env Env) (Env, error) {
	p, ok := env.value(EnvDotenvPath)
	if !ok {
		return env, nil
	}
	vars, err := LoadDotenv(p)
	if err != nil {
		return Env{}, fmt.Errorf("%s=%s: %w", EnvDotenvPath, p, err)
	}
	return env.withFallback(vars), nil
}

func parseRuntime(file string, data []byte, env Env) (*Runtime, error) {
	r := Default()
	r.env = env
	b := newBinder(file, data)
	if file != "" {
		t, err := parseTOML(file, data)
		if err != nil {
			return nil, err
		}
		b.bindStruct(path{}, t, reflect.ValueOf(r).Elem())
		if abs, err := filepath.Abs(file); err == nil {
			r.File = abs
		}
	}
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	ov := newOverrides(env)
	ov.walk(envPrefix, path{}, reflect.ValueOf(r).Elem())
	if len(ov.errs) > 0 {
		return nil, inFile(ov.errs, file)
	}
	for k := range ov.set {
		b.present[k] = true
	}
	r.Warnings = ov.unknown(envPrefix, func(name string) bool {
		return name == EnvConfigPath || name == EnvDotenvPath ||
			strings.HasPrefix(name, envPrefix+"SINK_") || strings.HasPrefix(name, envPrefix+"SOURCE_")
	})
	r.validate(b)
	markVars(b.errs, ov.set)
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	r.resolvePaths()
	return r, nil
}

// inFile names the file whose keys the variables override.
func inFile(errs Errors, file string) Errors {
	for _, e := range errs {
		e.File = file
	}
	return errs
}

// markVars names the variable that set a key that failed validation.
func markVars(errs Errors, set map[string]string) {
	for _, e := range errs {
		if v, ok := set[e.Key]; ok {
			e.Var = v
		}
	}
}

// resolvePaths makes the runtime's relative paths absolute.
func (r *Runtime) resolvePaths() {
	dir := ""
	if r.File != "" {
		dir = filepath.Dir(r.File)
	}
	r.State.Path = resolvePath(dir, r.State.Path, false)
	r.Connectors.ConfigDir = resolvePath(dir, r.Connectors.ConfigDir, true)
	for i, d := range r.Connectors.AllowedDirs {
		r.Connectors.AllowedDirs[i] = resolvePath(dir, d, true)
	}
	r.Iggy.TLS.CAFile = resolvePath(dir, r.Iggy.TLS.CAFile, true)
	r.HTTP.TLS.CertFile = resolvePath(dir, r.HTTP.TLS.CertFile, true)
	r.HTTP.TLS.KeyFile = resolvePath(dir, r.HTTP.TLS.KeyFile, true)
}

// resolvePath anchors a relative path p at dir, the directory of the file
// that names it. For paths that must already exist (existing = true), a
// path that does not exist there but does exist relative to the working
// directory, as upstream resolves it, is taken from the working directory:
// upstream's example files name paths from the repository root.
func resolvePath(dir, p string, existing bool) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	anchored := filepath.Join(dir, p)
	if existing && dir != "" {
		if _, err := os.Stat(anchored); err != nil {
			if _, err := os.Stat(p); err == nil {
				anchored = p
			}
		}
	}
	if abs, err := filepath.Abs(anchored); err == nil {
		return abs
	}
	return anchored
}

// ParseConnector reads one connector file's contents; file names errors
// and anchors avro_schema_path. Overrides come from the WithEnv
// environment. The error, if any, is an Errors list.
func ParseConnector(file string, data []byte, opts ...Option) (*Connector, error) {
	o := buildOptions(opts)
	t, err := parseTOML(file, data)
	if err != nil {
		return nil, err
	}
	return connectorFromTable(newBinder(file, data), t, "", "", o.env)
}

// DecodeConnectorJSON reads a connector from upstream's JSON shape (the
// runtime API's request bodies and the HTTP provider's responses), where
// kind and key come from the context; key may be empty when the body
// carries it. source labels errors, such as "request body".
func DecodeConnectorJSON(source string, kind Kind, key string, data []byte, opts ...Option) (*Connector, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, Errors{{File: source, Msg: "invalid JSON: " + err.Error()}}
	}
	t, ok := v.(*table)
	if !ok {
		return nil, Errors{{File: source, Msg: "expected a JSON object, got " + typeName(v)}}
	}
	return connectorFromTable(newBinder(source, nil), t, kind, key, buildOptions(opts).env)
}

// connectorFromTable decodes, applies overrides and defaults, validates.
func connectorFromTable(b *binder, t *table, kind Kind, key string, env Env) (*Connector, error) {
	c, _, err := loadConnector(b, t, kind, key, env)
	return c, err
}

// loadConnector is connectorFromTable that also returns the overrides
// applied (nil when decoding failed first).
func loadConnector(b *binder, t *table, kind Kind, key string, env Env) (*Connector, *overrides, error) {
	c := bindConnector(b, t, kind, key)
	if len(b.errs) > 0 || c == nil {
		return nil, nil, b.errs
	}
	ov := newOverrides(env)
	prefixes := connectorPrefixes(c.Type, c.Key)
	for _, prefix := range prefixes {
		c.applyEnv(ov, prefix)
	}
	c.PluginConfig = ov.pluginConfig(prefixes, path{"plugin_config"}, c.PluginConfig)
	if len(ov.errs) > 0 {
		return nil, ov, inFile(ov.errs, b.file)
	}
	for k := range ov.set {
		b.present[k] = true
	}
	c.PluginConfigLines, c.PluginConfigVars = pluginConfigOrigins(b.src, c.PluginConfig, ov.set)
	c.finish()
	c.validate(b)
	markVars(b.errs, ov.set)
	if len(b.errs) > 0 {
		return nil, ov, b.errs
	}
	if b.file != "" && b.src != nil {
		dir := filepath.Dir(b.file)
		for i := range c.Producers {
			c.Producers[i].AvroSchemaPath = resolvePath(dir, c.Producers[i].AvroSchemaPath, true)
			c.Producers[i].StreamSchema.resolve(dir)
		}
		for i := range c.Consumers {
			c.Consumers[i].AvroSchemaPath = resolvePath(dir, c.Consumers[i].AvroSchemaPath, true)
			c.Consumers[i].StreamSchema.resolve(dir)
		}
	}
	return c, ov, nil
}

// applyEnv applies the variables of one prefix through a document view of
// c, so that every key has the same variable as in a file.
func (c *Connector) applyEnv(ov *overrides, prefix string) {
	if c.Type == KindSource {
		d := sourceDoc{connectorDoc: c.doc(), Streams: c.Producers}
		ov.walk(prefix, path{}, reflect.ValueOf(&d).Elem())
		*c = mergeDoc(c, d.connectorDoc)
		c.Producers = d.Streams
		return
	}
	d := sinkDoc{connectorDoc: c.doc(), Streams: c.Consumers}
	ov.walk(prefix, path{}, reflect.ValueOf(&d).Elem())
	*c = mergeDoc(c, d.connectorDoc)
	c.Consumers = d.Streams
}

func (c *Connector) doc() connectorDoc {
	return connectorDoc{
		Type: c.Type, Key: c.Key, Enabled: c.Enabled, Version: c.Version, Name: c.Name, Path: c.Path,
		PluginConfigFormat: c.PluginConfigFormat, PluginConfig: c.PluginConfig,
		Transforms: transforms(c.Transforms), Verbose: c.Verbose, Benchmark: c.Benchmark,
	}
}

func mergeDoc(c *Connector, d connectorDoc) Connector {
	n := d.connector()
	n.Producers, n.Consumers, n.File, n.CreatedAt = c.Producers, c.Consumers, c.File, c.CreatedAt
	return n
}
