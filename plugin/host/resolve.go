package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// Importing plugin/host makes connector.Default resolve plugin paths.
func init() { Install(connector.Default) }

// Install makes reg resolve paths that name plugins (see Resolve).
func Install(reg *connector.Registry) { reg.SetResolver(Resolve) }

// Resolve is connector.Registry's resolver for plugins: a path (relative
// to dir when it is not absolute) that names a ferry-plugin.toml, a
// directory holding one, or an executable is a plugin, whose Info checks
// plugin_config with the manifest's settings or those of its Spec call
// and builds a Source or a Sink. A path that does not exist is not a
// plugin (ok false), unless it names a .toml file.
func Resolve(kind connector.Kind, path, dir string) (connector.Info, bool, error) {
	m, ok, err := Find(path, dir)
	if !ok || err != nil {
		return connector.Info{}, ok, err
	}
	d, err := Describe(m)
	if err != nil {
		return connector.Info{}, true, err
	}
	if !slices.Contains(d.Kinds, plugin.Kind(kind)) {
		return connector.Info{}, true, fmt.Errorf("%s is a %s plugin, not a %s", where(m), joinKinds(d.Kinds), kind)
	}
	return d.Info(kind), true, nil
}

func where(m *plugin.Manifest) string {
	if m.File != "" {
		return m.File
	}
	return m.Command
}

func joinKinds(ks []plugin.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " and ")
}

// Find reads the manifest path names (relative to dir): a manifest file,
// a directory with a ferry-plugin.toml, or an executable (then
// plugin.ForExecutable). ok is false when path names no file.
func Find(path, dir string) (*plugin.Manifest, bool, error) {
	p := path
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(p, ".toml"):
		return nil, true, fmt.Errorf("plugin manifest %s: %w", p, fs.ErrNotExist)
	case err != nil:
		return nil, false, nil
	case fi.IsDir():
		mf := filepath.Join(p, plugin.ManifestName)
		if _, err := os.Stat(mf); err != nil {
			return nil, false, nil
		}
		p = mf
		fallthrough
	case strings.HasSuffix(p, ".toml"):
		m, err := plugin.LoadManifest(p)
		return m, true, err
	case fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0:
		m, err := plugin.ForExecutable(p)
		return m, true, err
	}
	return nil, true, fmt.Errorf("%s is neither a plugin manifest (%s) nor an executable", p, plugin.ManifestName)
}

// Description is what Ferry knows of a plugin before running it as a
// connector: its manifest and what its Spec call said, or the manifest's
// inline settings.
type Description struct {
	Manifest *plugin.Manifest
	Name     string
	Summary  string
	Kinds    []plugin.Kind
	Spec     *connector.Spec
}

// Info is the connector.Info of the plugin as a connector of kind.
func (d *Description) Info(kind connector.Kind) connector.Info {
	m, spec := d.Manifest, d.Spec
	info := connector.Info{Kind: kind, Name: d.Name, Summary: d.Summary, Spec: spec}
	parse := func(cfg connector.Config) error {
		_, err := spec.Parse(cfg.Plugin)
		return err
	}
	switch kind {
	case connector.KindSource:
		info.NewSource = func(cfg connector.Config) (connector.Source, error) {
			if err := parse(cfg); err != nil {
				return nil, err
			}
			return NewSource(m, spec, cfg)
		}
	case connector.KindSink:
		info.NewSink = func(cfg connector.Config) (connector.Sink, error) {
			if err := parse(cfg); err != nil {
				return nil, err
			}
			return NewSink(m, spec, cfg)
		}
	}
	return info
}

var describeCache = struct {
	sync.Mutex
	byKey map[string]*Description
}{byKey: map[string]*Description{}}

// Describe is what the manifest says, completed by the plugin's Spec
// call when the manifest asks for it (the call starts the plugin once;
// its answer is kept while the manifest and the executable are
// unchanged). The spec's Events are the manifest's [[events]] either
// way.
func Describe(m *plugin.Manifest) (*Description, error) {
	d := &Description{Manifest: m, Name: m.Name, Summary: m.Summary, Spec: m.Spec}
	if m.Kind != "" {
		d.Kinds = []plugin.Kind{m.Kind}
	}
	if !m.SpecFromCall {
		if d.Spec == nil {
			d.Spec = connector.NewSpec()
			d.Spec.Events = m.Events
		}
		return d, nil
	}
	key := cacheKey(m)
	describeCache.Lock()
	defer describeCache.Unlock()
	if c, ok := describeCache.byKey[key]; ok && key != "" {
		return c, nil
	}
	resp, err := SpecCall(context.Background(), m, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	if d.Spec, err = plugin.SpecFromProto(resp.Settings); err != nil {
		return nil, fmt.Errorf("plugin %s: its Spec call answered settings that cannot work: %w", where(m), err)
	}
	// The Spec call carries settings only; the event types a plugin
	// produces or consumes come from its manifest's [[events]].
	d.Spec.Events = m.Events
	if d.Name == "" || m.File == "" {
		d.Name = resp.Name
	}
	if d.Summary == "" {
		d.Summary = resp.Summary
	}
	if m.Kind == "" {
		for _, k := range resp.Kinds {
			switch plugin.Kind(k) {
			case plugin.KindSource, plugin.KindSink, plugin.KindTransform:
				d.Kinds = append(d.Kinds, plugin.Kind(k))
			default:
				return nil, fmt.Errorf("plugin %s: its Spec call names the kind %q (want source, sink or transform)", where(m), k)
			}
		}
		if len(d.Kinds) == 0 {
			return nil, fmt.Errorf("plugin %s: its Spec call names no kind", where(m))
		}
	}
	if d.Name == "" {
		d.Name = filepath.Base(m.Command)
	}
	if key != "" {
		describeCache.byKey[key] = d
	}
	return d, nil
}

// cacheKey names a manifest and its executable as they are now; "" when
// they cannot be read.
func cacheKey(m *plugin.Manifest) string {
	var b strings.Builder
	for _, f := range []string{m.File, m.Command} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%s|%d|%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	fmt.Fprintf(&b, "%v", m.Args)
	return b.String()
}

// SpecCall starts the plugin, asks its Spec and ends it.
func SpecCall(ctx context.Context, m *plugin.Manifest, log *slog.Logger) (*pluginpb.SpecResponse, error) {
	sup := newSupervisor(m, log, false)
	p, err := sup.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.shutdown()
	var resp *pluginpb.SpecResponse
	err = sup.call(ctx, p, "Spec", m.Limits.CallTimeout, func(ctx context.Context) error {
		var err error
		resp, err = p.rpc().plugin.Spec(ctx, &pluginpb.SpecRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", where(m), err)
	}
	return resp, nil
}
