package connector

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Kind tells sources from sinks.
type Kind string

// Connector kinds, as in a connector file's `type`.
const (
	KindSource Kind = "source"
	KindSink   Kind = "sink"
)

// Info describes a built-in connector.
type Info struct {
	Kind Kind
	// Name is what a connector file's `path` names, such as "random".
	Name string
	// Aliases are other names for the same connector, such as upstream's
	// library name "libiggy_connector_random_source".
	Aliases []string
	// Summary is one line for listings.
	Summary string
	// Spec declares the connector's plugin_config: the runtime checks a
	// configuration against it before building the connector (Admit),
	// the constructor parses it (Spec.Parse), API answers redact the
	// fields it marks secret, and `ferry connectors describe` and
	// docs/connectors.md are generated from it. Nil only for connectors
	// that declare nothing (then secrets are guessed by key name).
	Spec *Spec
	// NewSource builds a source (for KindSource).
	NewSource func(Config) (Source, error)
	// NewSink builds a sink (for KindSink).
	NewSink func(Config) (Sink, error)
}

// Registry maps connector names to their Info. The zero value is not
// usable; use NewRegistry, or Default with MustRegister from init.
type Registry struct {
	mu       sync.RWMutex
	infos    map[Kind]map[string]*Info // by name and alias
	resolver Resolver
}

// Resolver finds a connector that is not registered, such as an
// out-of-process plugin a path names (package plugin/host). dir is the
// directory a relative path resolves against: the connector file's, or
// "" for the working directory. ok is false when path names nothing the
// resolver knows; an error says why path names a plugin that cannot run
// (a broken manifest, a kind that does not match).
type Resolver func(kind Kind, path, dir string) (info Info, ok bool, err error)

// SetResolver makes Resolve ask fn for paths no registered connector has.
func (r *Registry) SetResolver(fn Resolver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolver = fn
}

// Resolve is Lookup, then the registry's Resolver for a path no
// registered connector has (relative paths against dir).
func (r *Registry) Resolve(kind Kind, path, dir string) (Info, bool, error) {
	if info, ok := r.Lookup(kind, path); ok {
		return info, true, nil
	}
	r.mu.RLock()
	fn := r.resolver
	r.mu.RUnlock()
	if fn == nil {
		return Info{}, false, nil
	}
	return fn(kind, path, dir)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{infos: map[Kind]map[string]*Info{KindSource: {}, KindSink: {}}}
}

// Default is the registry built-in connectors add themselves to.
var Default = NewRegistry()

// MustRegister adds info to Default and panics on a bad or duplicate entry;
// call it from init.
func MustRegister(info Info) {
	if err := Default.Register(info); err != nil {
		panic(err)
	}
}

// Register adds a connector. Names and aliases must be unique per kind.
func (r *Registry) Register(info Info) error {
	switch {
	case info.Name == "":
		return fmt.Errorf("connector: register: empty name")
	case info.Kind == KindSource && info.NewSource == nil, info.Kind == KindSink && info.NewSink == nil:
		return fmt.Errorf("connector: register %s %q: no constructor", info.Kind, info.Name)
	case info.Kind != KindSource && info.Kind != KindSink:
		return fmt.Errorf("connector: register %q: kind %q, want source or sink", info.Name, info.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := r.infos[info.Kind]
	names := append([]string{info.Name}, info.Aliases...)
	for _, n := range names {
		if _, dup := byName[normalize(n, info.Kind)]; dup {
			return fmt.Errorf("connector: register %s %q: name %q is taken", info.Kind, info.Name, n)
		}
	}
	stored := info
	for _, n := range names {
		byName[normalize(n, info.Kind)] = &stored
	}
	return nil
}

// Lookup finds the connector a connector file's `path` names: a built-in
// name ("random"), an alias, or an upstream library path such as
// "target/release/libiggy_connector_random_source.so", which maps to the
// built-in with the same job.
func (r *Registry) Lookup(kind Kind, path string) (Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if info, ok := r.infos[kind][normalize(path, kind)]; ok {
		return *info, true
	}
	return Info{}, false
}

// List returns the connectors of a kind, sorted by name.
func (r *Registry) List(kind Kind) []Info {
	r.mu.RLock()
	defer r.mu.RUnlock()
	seen := map[*Info]bool{}
	var out []Info
	for _, info := range r.infos[kind] {
		if !seen[info] {
			seen[info] = true
			out = append(out, *info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// normalize reduces a path or name to the registry key: the base name
// without a shared-library extension, a "libiggy_connector_" or
// "iggy_connector_" prefix, and a "_source"/"_sink" suffix; dashes become underscores.
func normalize(path string, kind Kind) string {
	n := strings.ToLower(filepath.Base(path))
	for _, ext := range []string{".so", ".dylib", ".dll"} {
		n = strings.TrimSuffix(n, ext)
	}
	n = strings.ReplaceAll(n, "-", "_")
	n = strings.TrimPrefix(n, "libiggy_connector_")
	n = strings.TrimPrefix(n, "iggy_connector_")
	n = strings.TrimSuffix(n, "_"+string(kind))
	return n
}
