package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// ManifestName is the file name of a plugin manifest.
const ManifestName = "ferry-plugin.toml"

// Manifest is a plugin's ferry-plugin.toml:
//
//	name = "go-sink"
//	kind = "sink"                 # source | sink | transform
//	summary = "writes each message as a line of a file"
//	command = "./go-sink"         # relative to this file's directory; a bare name is looked up there, then on PATH
//	args = ["--quiet"]
//	transport = "grpc"            # or "lines" (newline-delimited JSON on stdin/stdout)
//	spec = "call"                 # settings from the plugin's Spec call; "inline": the [[settings]] below
//	env = ["DATABASE_URL", "APP_*"] # variables of the runtime's environment the plugin sees, besides PATH, HOME, LANG, LC_*, TZ, TMPDIR
//
//	[limits]
//	call_timeout = "30s"          # a call not answered within this is a hung plugin: killed, restarted, batch replayed
//	start_timeout = "30s"         # from start to the handshake line
//	memory_limit = "512MiB"       # address-space limit of the process (RLIMIT_AS); 0: none
//	restart_backoff = "100ms"     # first wait before starting a plugin process again, doubling …
//	max_restart_backoff = "30s"   # … up to this
//	max_line = "64MiB"            # transport "lines": the longest line the plugin may write
//
//	[[settings]]                  # the plugin_config keys, with spec = "inline"
//	name = "path"
//	type = "string"               # string int float bool duration size enum list map object any either
//	required = true
//	doc = "the file to write"
//
//	[[events]]                    # an event type the plugin produces (source) or consumes (sink)
//	name = "line.read"
//	description = "one line of the input file"
//	version = "1.0.0"
//	schema_path = "schemas/line.json" # relative to this file's directory; or schema, inline
//	format = "json_schema"        # the default; "avro" (.avsc), "proto" (.proto, with message_type)
//	topics = ["lines"]            # the connector's topics (TOPIC or STREAM/TOPIC) it applies to; default all
//
// A settings table also takes default, example, secret, values and
// aliases (an enum's), elem (a list's or a map's element, a table),
// fields (an object's, tables), alternatives (an either's), min, max and
// numbers, as connector.Field has them.
//
// An events table's schema is the schema inline: JSON text (a string)
// or, for a JSON Schema or an Avro schema, a TOML table that is the same
// document. The declarations become the spec's Events
// (connector.EventType) whichever way the settings come, and package
// eventtypes merges them into the deployment's catalog; an entry of
// config.toml's [events] with the same name wins over the manifest's.
type Manifest struct {
	// File is the manifest's absolute path; empty for an executable named
	// directly (then Dir is the executable's directory).
	File string
	// Dir is the directory the plugin runs in, and relative paths of the
	// manifest resolve against.
	Dir       string
	Name      string
	Kind      Kind
	Summary   string
	Command   string // absolute, or a name found on PATH at start
	Args      []string
	Transport Transport
	// Spec is the inline settings; nil when SpecFromCall.
	Spec *connector.Spec
	// SpecFromCall: the settings come from the plugin's Spec call.
	SpecFromCall bool
	// Env names the variables of the runtime's environment the plugin
	// sees besides BaseEnv: names, or prefixes ending in "*".
	Env    []string
	Limits Limits
	// Events are the [[events]] tables: the event types the plugin
	// produces or consumes, schema paths made absolute.
	Events []connector.EventType
}

// Limits bound a plugin process.
type Limits struct {
	// CallTimeout is the deadline of one call (a Poll gets it on top of
	// the time it may wait for messages).
	CallTimeout time.Duration
	// StartTimeout bounds the time from starting the command to its
	// handshake line.
	StartTimeout time.Duration
	// MemoryLimit is the address-space limit of the process in bytes
	// (RLIMIT_AS); 0 means none.
	MemoryLimit int64
	// RestartBackoff and MaxRestartBackoff are the wait before the
	// plugin's process is started again after it failed: RestartBackoff,
	// doubling up to MaxRestartBackoff; a call that succeeds resets it.
	RestartBackoff, MaxRestartBackoff time.Duration
	// MaxLine bounds a line the plugin writes on the line protocol; a
	// longer one is a protocol error.
	MaxLine int64
}

// Default limits.
const (
	DefaultCallTimeout       = 30 * time.Second
	DefaultStartTimeout      = 30 * time.Second
	DefaultRestartBackoff    = 100 * time.Millisecond
	DefaultMaxRestartBackoff = 30 * time.Second
)

// DefaultLimits are the limits of a plugin that declares none.
func DefaultLimits() Limits {
	return Limits{CallTimeout: DefaultCallTimeout, StartTimeout: DefaultStartTimeout,
		RestartBackoff: DefaultRestartBackoff, MaxRestartBackoff: DefaultMaxRestartBackoff, MaxLine: DefaultMaxLine}
}

var manifestSpec = connector.NewSpec(
	connector.NewStringField("name").Require().WithDoc("the plugin's name").WithCheck(func(v any) error {
		if strings.TrimSpace(v.(string)) == "" {
			return errors.New("want the plugin's name")
		}
		return nil
	}),
	connector.NewEnumField("kind", string(KindSource), string(KindSink), string(KindTransform)).Require(),
	connector.NewStringField("summary"),
	connector.NewStringField("command").Require().WithCheck(func(v any) error {
		if strings.TrimSpace(v.(string)) == "" || strings.ContainsRune(v.(string), 0) {
			return errors.New("want the plugin's executable")
		}
		return nil
	}),
	connector.NewStringListField("args"),
	connector.NewEnumField("transport", string(TransportGRPC), string(TransportLines)).WithDefault(string(TransportGRPC)),
	connector.NewEnumField("spec", "call", "inline"),
	connector.NewListField("env", connector.NewStringField("").WithCheck(func(v any) error { return CheckEnvPattern(v.(string)) })),
	connector.NewObjectField("limits",
		connector.NewDurationField("call_timeout").WithDefault(DefaultCallTimeout),
		connector.NewDurationField("start_timeout").WithDefault(DefaultStartTimeout),
		connector.NewSizeField("memory_limit").WithDefault(int64(0)),
		connector.NewDurationField("restart_backoff").WithDefault(DefaultRestartBackoff),
		connector.NewDurationField("max_restart_backoff").WithDefault(DefaultMaxRestartBackoff),
		connector.NewSizeField("max_line").WithDefault(int64(DefaultMaxLine)),
	),
	connector.NewListField("settings", connector.NewAnyField("")),
	connector.NewListField("events", connector.NewAnyField("")),
).Lint(func(s *Settings, fail connector.FailFunc) {
	l := s.Object("limits")
	if l.Duration("call_timeout") <= 0 {
		fail("limits.call_timeout", "must be more than 0")
	}
	if l.Duration("start_timeout") <= 0 {
		fail("limits.start_timeout", "must be more than 0")
	}
	if l.Duration("max_restart_backoff") < l.Duration("restart_backoff") {
		fail("limits.max_restart_backoff", "must not be shorter than restart_backoff")
	}
	if l.Size("max_line") < 1024 {
		fail("limits.max_line", "must be at least 1KiB")
	}
	if s.String("spec") == "call" && s.String("transport") == string(TransportLines) {
		fail("spec", `a plugin on the line protocol has no Spec call; declare its settings with [[settings]] tables (spec = "inline")`)
	}
	if tables, _ := s.Value("settings").([]any); s.String("spec") == "call" && len(tables) > 0 {
		fail("spec", `"call" takes the settings from the plugin; remove the [[settings]] tables or say spec = "inline"`)
	}
})

// Settings is connector.Settings, named here for the manifest's lint.
type Settings = connector.Settings

var settingSpec = connector.NewSpec(
	connector.NewStringField("name").Require(),
	connector.NewEnumField("type", "string", "int", "float", "bool", "duration", "size", "enum", "list", "map",
		"object", "any", "either").Require().WithAliases(map[string]string{"integer": "int", "number": "float",
		"boolean": "bool", "byte size": "size", "value": "any"}),
	connector.NewStringField("doc"),
	connector.NewAnyField("default"),
	connector.NewBoolField("required"),
	connector.NewBoolField("secret"),
	connector.NewAnyField("example"),
	connector.NewStringListField("values"),
	connector.NewStringMapField("aliases"),
	connector.NewAnyField("elem"),
	connector.NewListField("fields", connector.NewAnyField("")),
	connector.NewListField("alternatives", connector.NewAnyField("")),
	connector.NewIntField("min"),
	connector.NewIntField("max"),
	connector.NewBoolField("numbers"),
)

var eventSpec = connector.NewSpec(
	connector.NewStringField("name").Require().WithDoc("the event type's name, such as \"order.created\""),
	connector.NewStringField("description"),
	connector.NewStringField("version"),
	connector.NewEnumField("format", connector.EventFormatJSONSchema, connector.EventFormatAvro, connector.EventFormatProto).
		WithAliases(map[string]string{"jsonschema": connector.EventFormatJSONSchema, "json-schema": connector.EventFormatJSONSchema,
			"protobuf": connector.EventFormatProto}),
	connector.NewAnyField("schema"),
	connector.NewStringField("schema_path"),
	connector.NewStringField("message_type"),
	connector.NewStringListField("topics"),
)

// LoadManifest reads and checks a manifest file.
func LoadManifest(file string) (*Manifest, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	return ParseManifest(abs, data)
}

// ParseManifest checks a manifest's text; file names it in errors and its
// directory is where relative paths resolve. Every problem is reported at
// once, each with its key.
func ParseManifest(file string, data []byte) (*Manifest, error) {
	var values map[string]any
	if _, err := toml.Decode(string(data), &values); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	values = plainTOML(values).(map[string]any)
	set, err := manifestSpec.Parse(connector.PluginConfig{Values: values, Source: file, Table: "manifest"})
	if err != nil {
		return nil, stripTable(err, "manifest")
	}
	m := &Manifest{File: file, Dir: filepath.Dir(file), Name: set.String("name"), Kind: Kind(set.String("kind")),
		Summary: set.String("summary"), Args: set.Strings("args"), Transport: Transport(set.String("transport")),
		Env: set.Strings("env")}
	l := set.Object("limits")
	m.Limits = Limits{CallTimeout: l.Duration("call_timeout"), StartTimeout: l.Duration("start_timeout"),
		MemoryLimit: l.Size("memory_limit"), RestartBackoff: l.Duration("restart_backoff"),
		MaxRestartBackoff: l.Duration("max_restart_backoff"), MaxLine: l.Size("max_line")}
	m.Command = resolveCommand(m.Dir, set.String("command"))
	tables, _ := set.Value("settings").([]any)
	m.SpecFromCall = set.String("spec") == "call" || (set.String("spec") == "" && len(tables) == 0)
	if m.Transport == TransportLines {
		m.SpecFromCall = false // no Spec call: the [[settings]], or none
	}
	events, _ := set.Value("events").([]any)
	var evErrs connector.SettingErrors
	for i, t := range events {
		et, err := eventType(m, fmt.Sprintf("events[%d]", i), t)
		if err != nil {
			evErrs = append(evErrs, asSettingErrors(err, file)...)
			continue
		}
		if slices.ContainsFunc(m.Events, func(o connector.EventType) bool { return o.Name == et.Name }) {
			evErrs = append(evErrs, &connector.SettingError{File: file, Key: fmt.Sprintf("events[%d].name", i),
				Msg: fmt.Sprintf("event type %q is declared twice", et.Name)})
			continue
		}
		m.Events = append(m.Events, et)
	}
	if !m.SpecFromCall {
		var errs connector.SettingErrors
		fields := make([]*pluginpb.Field, 0, len(tables))
		for i, t := range tables {
			pf, err := settingField(file, fmt.Sprintf("settings[%d]", i), t)
			if err != nil {
				errs = append(errs, asSettingErrors(err, file)...)
				continue
			}
			fields = append(fields, pf)
		}
		if errs = append(errs, evErrs...); len(errs) > 0 {
			return nil, errs
		}
		if m.Spec, err = SpecFromProto(fields); err != nil {
			return nil, fmt.Errorf("%s: settings: %w", file, err)
		}
		m.Spec.Events = m.Events
	}
	if len(evErrs) > 0 {
		return nil, evErrs
	}
	return m, nil
}

// eventType reads one [[events]] table; errors name the manifest and the
// key (events[0].schema).
func eventType(m *Manifest, key string, v any) (connector.EventType, error) {
	file := m.File
	t, ok := v.(map[string]any)
	if !ok {
		return connector.EventType{}, &connector.SettingError{File: file, Key: key, Msg: fmt.Sprintf("expected a table, got %T", v)}
	}
	set, err := eventSpec.Parse(connector.PluginConfig{Values: t, Source: file, Table: key})
	if err != nil {
		return connector.EventType{}, err
	}
	et := connector.EventType{Name: set.String("name"), Description: set.String("description"),
		Version: set.String("version"), Format: set.String("format"), MessageType: set.String("message_type"),
		Topics: set.Strings("topics"), File: file, Key: key,
		Origin: fmt.Sprintf("plugin %s's manifest %s (%s)", m.Name, file, key)}
	switch s := set.Value("schema").(type) {
	case nil:
	case string:
		et.Schema = s
	case map[string]any, []any:
		b, err := json.Marshal(s)
		if err != nil {
			return et, &connector.SettingError{File: file, Key: key + ".schema", Msg: err.Error()}
		}
		et.Schema = string(b)
	default:
		return et, &connector.SettingError{File: file, Key: key + ".schema",
			Msg: fmt.Sprintf("expected the schema as JSON text (a string) or as a table, got %T", s)}
	}
	var errs connector.SettingErrors
	if p := set.String("schema_path"); p != "" {
		if strings.ContainsRune(p, 0) {
			errs = append(errs, &connector.SettingError{File: file, Key: key + ".schema_path", Msg: "a path with a NUL byte"})
		} else {
			if !filepath.IsAbs(p) {
				p = filepath.Join(m.Dir, p)
			}
			et.SchemaPath = filepath.Clean(p)
			if fi, err := os.Stat(et.SchemaPath); err != nil {
				errs = append(errs, &connector.SettingError{File: file, Key: key + ".schema_path",
					Msg: fmt.Sprintf("cannot read the schema file %s: %v", et.SchemaPath, unwrapPathErr(err))})
			} else if fi.IsDir() {
				errs = append(errs, &connector.SettingError{File: file, Key: key + ".schema_path",
					Msg: fmt.Sprintf("%s is a directory; expected a schema file", et.SchemaPath)})
			}
		}
	}
	if err := et.Check(); err != nil {
		for _, e := range asSettingErrors(err, file) {
			e.File, e.Key = file, key+"."+e.Key
			if !slices.ContainsFunc(errs, func(o *connector.SettingError) bool { return o.Key == e.Key }) {
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 {
		return et, errs
	}
	return et, nil
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// resolveCommand makes a command with a directory part absolute against
// dir; a bare name is dir's file when dir has one, else looked up on PATH
// when the plugin starts.
func resolveCommand(dir, command string) string {
	if filepath.IsAbs(command) {
		return filepath.Clean(command)
	}
	if strings.ContainsRune(command, filepath.Separator) || strings.ContainsRune(command, '/') {
		return filepath.Join(dir, command)
	}
	if fi, err := os.Stat(filepath.Join(dir, command)); err == nil && !fi.IsDir() {
		return filepath.Join(dir, command)
	}
	return command
}

// settingField reads one [[settings]] table (or an elem, fields or
// alternatives table inside one) into the Spec call's field form.
func settingField(file, key string, v any) (*pluginpb.Field, error) {
	t, ok := v.(map[string]any)
	if !ok {
		return nil, &connector.SettingError{File: file, Key: key, Msg: fmt.Sprintf("expected a table, got %T", v)}
	}
	set, err := settingSpec.Parse(connector.PluginConfig{Values: t, Source: file, Table: key})
	if err != nil {
		return nil, err
	}
	typ := typeNames[set.String("type")]
	pf := &pluginpb.Field{Name: set.String("name"), Type: typesToProto[typ], Doc: set.String("doc"),
		Required: set.Bool("required"), Secret: set.Bool("secret"), Values: set.Strings("values"),
		Aliases: set.StringMap("aliases"), Numbers: set.Bool("numbers")}
	if set.Has("min") {
		n := int64(set.Int("min"))
		pf.Min = &n
	}
	if set.Has("max") {
		n := int64(set.Int("max"))
		pf.Max = &n
	}
	for _, dv := range []struct {
		name string
		dst  *string
	}{{"default", &pf.DefaultJson}, {"example", &pf.ExampleJson}} {
		if x := set.Value(dv.name); x != nil {
			if *dv.dst, err = valueJSON(x); err != nil {
				return nil, &connector.SettingError{File: file, Key: key + "." + dv.name, Msg: err.Error()}
			}
		}
	}
	var errs connector.SettingErrors
	if e := set.Value("elem"); e != nil {
		if pf.Elem, err = settingField(file, key+".elem", e); err != nil {
			errs = append(errs, asSettingErrors(err, file)...)
		}
	}
	for _, sub := range []struct {
		name string
		dst  *[]*pluginpb.Field
	}{{"fields", &pf.Fields}, {"alternatives", &pf.Alternatives}} {
		list, _ := set.Value(sub.name).([]any)
		for i, e := range list {
			f, err := settingField(file, fmt.Sprintf("%s.%s[%d]", key, sub.name, i), e)
			if err != nil {
				errs = append(errs, asSettingErrors(err, file)...)
				continue
			}
			*sub.dst = append(*sub.dst, f)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if _, err := FieldFromProto(pf); err != nil {
		return nil, &connector.SettingError{File: file, Key: key, Msg: err.Error()}
	}
	return pf, nil
}

func asSettingErrors(err error, file string) connector.SettingErrors {
	var es connector.SettingErrors
	if errors.As(err, &es) {
		return es
	}
	var e *connector.SettingError
	if errors.As(err, &e) {
		return connector.SettingErrors{e}
	}
	return connector.SettingErrors{{File: file, Msg: err.Error()}}
}

// stripTable drops the "table." prefix the spec check gives keys.
func stripTable(err error, table string) error {
	var es connector.SettingErrors
	if !errors.As(err, &es) {
		return err
	}
	for _, e := range es {
		e.Key = strings.TrimPrefix(strings.TrimPrefix(e.Key, table), ".")
	}
	return es
}

// plainTOML turns TOML datetimes into text and []map[string]any into
// []any, the shapes a plugin_config holds.
func plainTOML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = plainTOML(e)
		}
		return x
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainTOML(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = plainTOML(e)
		}
		return x
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return v
}

// ForExecutable is the manifest of an executable named directly: its
// kind and settings come from the Spec call, with the default limits and
// no variables beyond BaseEnv.
func ForExecutable(path string) (*Manifest, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return &Manifest{Dir: filepath.Dir(abs), Name: filepath.Base(abs), Command: abs, Transport: TransportGRPC,
		SpecFromCall: true, Limits: DefaultLimits()}, nil
}
