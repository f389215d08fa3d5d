package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/ferryhq/ferry/internal/fsx"
)

type connID struct {
	kind Kind
	key  string
}

// scan is what the directory holds.
type scan struct {
	versions map[connID][]*Connector // sorted by version
	errs     []*LoadError
	known    map[string]bool // env names that address keys
	names    []string
}

// isConnectorFile reports whether a directory entry is a connector file:
// a *.toml file that is not hidden and not Cargo.toml.
func isConnectorFile(e fs.DirEntry) bool {
	n := e.Name()
	return e.Type().IsRegular() && strings.HasSuffix(n, ".toml") && !strings.HasPrefix(n, ".") &&
		!strings.EqualFold(n, "cargo.toml")
}

func (s *Store) scan(ctx context.Context) (*scan, error) {
	sc := &scan{versions: map[connID][]*Connector{}, known: map[string]bool{}, names: s.env.Names()}
	where := map[string]string{} // "kind/key/version" -> file
	for _, dir := range s.dirs() {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && dir != s.dir {
			continue // the run directory exists once something is created
		}
		if err != nil {
			return nil, fmt.Errorf("read connectors directory: %w", err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if !isConnectorFile(e) {
				continue
			}
			file := filepath.Join(dir, e.Name())
			c, known, err := s.readFile(file)
			for k := range known {
				sc.known[k] = true
			}
			if err != nil {
				sc.errs = append(sc.errs, loadErrorFor(file, err))
				continue
			}
			id := connID{c.Type, c.Key}
			vk := fmt.Sprintf("%s/%s/%d", c.Type, c.Key, c.Version)
			if other, dup := where[vk]; dup {
				if filepath.Dir(other) == dir {
					other = filepath.Base(other)
				}
				sc.errs = append(sc.errs, &LoadError{File: file, Type: c.Type, Key: c.Key,
					Err: fmt.Errorf("version %d of %s %q is also defined in %s; give each version its own number", c.Version, c.Type, c.Key, other)})
				continue
			}
			where[vk] = file
			sc.versions[id] = append(sc.versions[id], c)
		}
	}
	for id := range sc.versions {
		slices.SortFunc(sc.versions[id], func(a, b *Connector) int { return cmpU64(a.Version, b.Version) })
	}
	return sc, nil
}

// dirs are the directories versions are read from: config_dir, then the
// run directory when it is another.
func (s *Store) dirs() []string {
	if s.runDir == s.dir {
		return []string{s.dir}
	}
	return []string{s.dir, s.runDir}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Store) readFile(file string) (*Connector, map[string]bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	info, err := os.Stat(file)
	if err != nil {
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	t, err := parseTOML(file, data)
	if err != nil {
		return nil, nil, &identified{err: err, data: data}
	}
	c, ov, err := loadConnector(newBinder(file, data), t, "", "", s.env)
	var known map[string]bool
	if ov != nil {
		known = ov.known
	}
	if err != nil {
		return nil, known, &identified{err: err, data: data}
	}
	c.File, c.CreatedAt = file, info.ModTime().UTC()
	return c, known, nil
}

// identified carries a failed file's contents so that the error can name
// the connector.
type identified struct {
	err  error
	data []byte
}

func (e *identified) Error() string { return e.err.Error() }

func (e *identified) Unwrap() error { return e.err }

// loadErrorFor builds a LoadError, reading the type and key from the file
// when it parses that far, else taking the key from the file name.
func loadErrorFor(file string, err error) *LoadError {
	le := &LoadError{File: file, Err: err}
	var id *identified
	if errors.As(err, &id) {
		le.Err = id.err
		var m map[string]any
		_, _ = toml.NewDecoder(bytes.NewReader(id.data)).Decode(&m)
		if t, ok := m["type"].(string); ok {
			if k, err := canonical(Kind(""), t); err == nil {
				le.Type = Kind(k)
			}
		}
		if k, ok := m["key"].(string); ok && k != "" {
			le.Key = k
		}
	}
	if le.Key == "" {
		le.Key = strings.TrimSuffix(filepath.Base(file), ".toml")
	}
	return le
}

type activeVersions struct {
	Sinks   map[string]uint64 `toml:"sinks"`
	Sources map[string]uint64 `toml:"sources"`

	from map[connID]string // the file each entry was read from
}

func (a *activeVersions) m(kind Kind) map[string]uint64 {
	if kind == KindSource {
		if a.Sources == nil {
			a.Sources = map[string]uint64{}
		}
		return a.Sources
	}
	if a.Sinks == nil {
		a.Sinks = map[string]uint64{}
	}
	return a.Sinks
}

// file is the active versions file that records id.
func (a *activeVersions) file(id connID) string { return a.from[id] }

// activePaths are the active versions files, in the order they apply:
// config_dir's, then the run directory's, whose entries win.
func (s *Store) activePaths() []string {
	paths := []string{filepath.Join(s.dir, ActiveVersionsFile)}
	if s.runDir != s.dir {
		paths = append(paths, s.runActivePath())
	}
	return paths
}

// runActivePath is the active versions file the store writes.
func (s *Store) runActivePath() string { return filepath.Join(s.runDir, ActiveVersionsFile) }

// read scans the directories and reads the active versions.
func (s *Store) read(ctx context.Context) (*scan, *activeVersions, error) {
	sc, err := s.scan(ctx)
	if err != nil {
		return nil, nil, err
	}
	av, err := s.readActive()
	if err != nil {
		return nil, nil, err
	}
	return sc, av, nil
}

// readActive merges the active versions files: an entry of the run
// directory's wins over config_dir's.
func (s *Store) readActive() (*activeVersions, error) {
	all := &activeVersions{from: map[connID]string{}}
	for _, path := range s.activePaths() {
		a, err := s.readActiveFile(path)
		if err != nil {
			return nil, err
		}
		for _, kind := range []Kind{KindSink, KindSource} {
			for k, v := range a.m(kind) {
				all.m(kind)[k] = v
				all.from[connID{kind, k}] = path
			}
		}
	}
	return all, nil
}

// readActiveFile reads one active versions file; a missing file selects
// nothing.
func (s *Store) readActiveFile(path string) (*activeVersions, error) {
	var a activeVersions
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	md, err := toml.Decode(string(data), &a)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid (expected [sinks] and [sources] tables of key = version): %w", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("%s: unknown key %s (expected [sinks] and [sources] tables of key = version): %w", path, u[0], ErrInvalid)
	}
	return &a, nil
}

// active is the active version of id: the recorded one, else the highest.
func active(id connID, versions []*Connector, av *activeVersions) (v uint64, explicit, ok bool) {
	if n, ok := av.m(id.kind)[id.key]; ok {
		return n, true, true
	}
	if len(versions) == 0 {
		return 0, false, false
	}
	return versions[len(versions)-1].Version, false, true
}

func hasError(errs []*LoadError, id connID) bool {
	return slices.ContainsFunc(errs, func(e *LoadError) bool { return e.Type == id.kind && e.Key == id.key })
}

func versionList(vs []*Connector) string {
	out := make([]string, len(vs))
	for i, c := range vs {
		out[i] = strconv.FormatUint(c.Version, 10)
	}
	return strings.Join(out, ", ")
}

// envWarnings lists IGGY_CONNECTORS_SOURCE_* / _SINK_* variables that
// address no key of a loaded connector.
func envWarnings(names []string, known map[string]bool, cs []*Connector) []string {
	var prefixes []string
	for _, c := range cs {
		prefixes = append(prefixes, connectorPrefixes(c.Type, c.Key)...)
	}
	var knownList []string
	for k := range known {
		knownList = append(knownList, k)
	}
	sort.Strings(knownList)
	var out []string
	for _, n := range names {
		if known[n] || !(strings.HasPrefix(n, envPrefix+"SOURCE_") || strings.HasPrefix(n, envPrefix+"SINK_")) {
			continue
		}
		if slices.ContainsFunc(prefixes, func(p string) bool {
			return len(n) > len(p)+len(pluginConfigSegment) && strings.EqualFold(n[:len(p)+len(pluginConfigSegment)], p+pluginConfigSegment)
		}) {
			continue
		}
		msg := fmt.Sprintf("environment variable %s addresses no key of a loaded connector and is ignored", n)
		if sg := suggest(n, knownList); sg != "" {
			msg += "; did you mean " + sg + "?"
		}
		out = append(out, msg)
	}
	return out
}

func (s *Store) writeActiveFile(path string, av *activeVersions) error {
	var buf bytes.Buffer
	buf.WriteString("# Active connector versions, written by Ferry; the same format as upstream's runtime.\n")
	for _, sec := range []struct {
		name string
		m    map[string]uint64
	}{{"sinks", av.Sinks}, {"sources", av.Sources}} {
		buf.WriteString("\n[" + sec.name + "]\n")
		keys := make([]string, 0, len(sec.m))
		for k := range sec.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&buf, "%s = %d\n", quoteKey(k), sec.m[k])
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return fsx.WriteFile(path, buf.Bytes(), 0o644)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
