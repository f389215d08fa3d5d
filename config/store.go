package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/internal/fsx"
)

// ActiveVersionsFile is the file in config_dir that records the active
// version of each connector (upstream's name and format).
const ActiveVersionsFile = ".active_versions.toml"

// Store is the local provider: one file per connector version in a
// directory, as described in the package documentation. It reads the
// directory on every call, so edits made by hand are seen at once; writes
// are atomic. It is safe for concurrent use by one process.
type Store struct {
	dir    string // config_dir, read
	runDir string // where versions and active versions are written; dir unless WithRunDir
	env    Env
	mu     sync.Mutex // serializes writes
}

var _ Provider = (*Store)(nil)

// OpenStore opens the connector directory dir, which must exist. With
// WithRunDir, versions and active versions created at run time go to that
// directory (created when first needed) and dir is only read; versions
// are read from both, and an active version recorded in the run directory
// wins over one recorded in dir.
func OpenStore(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("connectors.config_dir is empty: %w", ErrInvalid)
	}
	o := buildOptions(opts)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("connectors.config_dir %s: %w (create it, or point config_dir at the directory of your connector files)", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("connectors.config_dir %s: not a directory: %w", dir, ErrInvalid)
	}
	runDir := o.runDir
	if runDir == "" {
		runDir = dir
	}
	return &Store{dir: dir, runDir: runDir, env: o.env}, nil
}

// Dir is the store's directory (config_dir).
func (s *Store) Dir() string { return s.dir }

// RunDir is where the store writes: the run directory, or Dir.
func (s *Store) RunDir() string { return s.runDir }

// Close does nothing; a Store holds no resources.
func (s *Store) Close() error { return nil }

// Load returns the active version of every connector in the directory.
func (s *Store) Load(ctx context.Context) (*ConnectorSet, error) {
	sc, av, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	set := &ConnectorSet{Errors: sc.errs}
	for id, vs := range sc.versions {
		n, explicit, _ := active(id, vs, av)
		i := slices.IndexFunc(vs, func(c *Connector) bool { return c.Version == n })
		if i < 0 {
			if !explicit || hasError(sc.errs, id) {
				continue
			}
			set.Errors = append(set.Errors, &LoadError{File: av.file(id), Type: id.kind, Key: id.key,
				Err: fmt.Errorf("active version %d does not exist (versions: %s); activate an existing version", n, versionList(vs))})
			continue
		}
		set.Connectors = append(set.Connectors, vs[i])
	}
	set.Warnings = envWarnings(sc.names, sc.known, set.Connectors)
	set.sort()
	return set, nil
}

// Versions lists the versions of a connector, lowest first.
func (s *Store) Versions(ctx context.Context, kind Kind, key string) ([]VersionInfo, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	sc, av, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	id := connID{kind, key}
	vs := sc.versions[id]
	if len(vs) == 0 {
		return nil, notFound(kind, key, nil)
	}
	n, _, _ := active(id, vs, av)
	out := make([]VersionInfo, len(vs))
	for i, c := range vs {
		out[i] = VersionInfo{Version: c.Version, Active: c.Version == n, CreatedAt: c.CreatedAt}
	}
	return out, nil
}

// Get returns one version of a connector.
func (s *Store) Get(ctx context.Context, kind Kind, key string, version uint64) (*Connector, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	sc, err := s.scan(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range sc.versions[connID{kind, key}] {
		if c.Version == version {
			return c, nil
		}
	}
	return nil, notFound(kind, key, &version)
}

// Active returns the active version of a connector.
func (s *Store) Active(ctx context.Context, kind Kind, key string) (*Connector, error) {
	if err := checkKindKey(kind, key); err != nil {
		return nil, err
	}
	sc, av, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	id := connID{kind, key}
	n, _, ok := active(id, sc.versions[id], av)
	if !ok {
		return nil, notFound(kind, key, nil)
	}
	for _, c := range sc.versions[id] {
		if c.Version == n {
			return c, nil
		}
	}
	return nil, notFound(kind, key, &n)
}

// SetActive records version as the active one in .active_versions.toml.
// The change takes effect when the runtime next loads the connector.
func (s *Store) SetActive(ctx context.Context, kind Kind, key string, version uint64) error {
	if err := checkKindKey(kind, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.Get(ctx, kind, key, version); err != nil {
		return err
	}
	av, err := s.readActiveFile(s.runActivePath())
	if err != nil {
		return err
	}
	av.m(kind)[key] = version
	return s.writeActiveFile(s.runActivePath(), av)
}

// Create saves c as a new version of its connector, numbered one above the
// highest existing version (0 for the first), in <type>_<key>_<version>.toml.
// Before validation, zero values that have a default take it: schema,
// batch_length, linger_time, poll_interval, retry_backoff,
// max_retry_backoff, on_error, consumer_group and name. The file is
// validated as the loader would read it, then written atomically. The
// returned connector is the saved version as loaded (with environment
// overrides).
func (s *Store) Create(ctx context.Context, c *Connector) (*Connector, error) {
	if c == nil {
		return nil, fmt.Errorf("create connector: nil: %w", ErrInvalid)
	}
	if err := checkKindKey(c.Type, c.Key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, err := s.scan(ctx)
	if err != nil {
		return nil, err
	}
	next := uint64(0)
	if vs := sc.versions[connID{c.Type, c.Key}]; len(vs) > 0 {
		next = vs[len(vs)-1].Version + 1
	}
	n := *c
	n.Version = next
	n.fillZeroDefaults()
	if err := os.MkdirAll(s.runDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", s.runDir, err)
	}
	file := filepath.Join(s.runDir, fmt.Sprintf("%s_%s_%d.toml", n.Type, n.Key, next))
	data, err := n.MarshalTOML()
	if err != nil {
		return nil, err
	}
	// Validate the bytes as they will be read, without overrides.
	if _, err := ParseConnector(file, data, WithEnv(MapEnv(nil))); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(file); err == nil {
		return nil, fmt.Errorf("create %s: the file exists but does not hold a readable version %d; move it away: %w", file, next, fs.ErrExist)
	}
	if err := fsx.WriteFile(file, data, 0o600); err != nil {
		return nil, err
	}
	saved, _, err := s.readFile(file)
	if err != nil {
		return nil, fmt.Errorf("read back %s: %w", file, err)
	}
	return saved, nil
}

// CreateTOML saves the connector file in data (type and key inside) as a
// new version; see Create.
func (s *Store) CreateTOML(ctx context.Context, data []byte) (*Connector, error) {
	c, err := ParseConnector("new connector version", data, WithEnv(MapEnv(nil)))
	if err != nil {
		return nil, err
	}
	return s.Create(ctx, c)
}

// fillZeroDefaults gives zero-valued fields their defaults.
func (c *Connector) fillZeroDefaults() {
	var pd ProducerStream
	pd.setDefaults()
	for i := range c.Producers {
		s := &c.Producers[i]
		s.Schema = cmpOr(s.Schema, pd.Schema)
		s.BatchLength = cmpOr(s.BatchLength, pd.BatchLength)
		s.LingerTime = cmpOr(s.LingerTime, pd.LingerTime)
	}
	var cd ConsumerStream
	cd.setDefaults()
	for i := range c.Consumers {
		s := &c.Consumers[i]
		s.Schema = cmpOr(s.Schema, cd.Schema)
		s.BatchLength = cmpOr(s.BatchLength, cd.BatchLength)
		s.PollInterval = cmpOr(s.PollInterval, cd.PollInterval)
		s.RetryBackoff = cmpOr(s.RetryBackoff, cd.RetryBackoff)
		s.MaxRetryBackoff = cmpOr(s.MaxRetryBackoff, cd.MaxRetryBackoff)
		s.OnError = cmpOr(s.OnError, cd.OnError)
	}
	c.finish()
}

// Delete removes a version. The active version cannot be deleted
// (ErrActiveVersion): activate another one first.
func (s *Store) Delete(ctx context.Context, kind Kind, key string, version uint64) error {
	if err := checkKindKey(kind, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, av, err := s.read(ctx)
	if err != nil {
		return err
	}
	id := connID{kind, key}
	vs := sc.versions[id]
	i := slices.IndexFunc(vs, func(c *Connector) bool { return c.Version == version })
	if i < 0 {
		return notFound(kind, key, &version)
	}
	if n, explicit, _ := active(id, vs, av); n == version {
		how := "the highest version, active because none was chosen"
		if explicit {
			how = "recorded as active in " + ActiveVersionsFile
		}
		return fmt.Errorf("delete %s %q version %d: it is %s; activate another version first: %w", kind, key, version, how, ErrActiveVersion)
	}
	if err := os.Remove(vs[i].File); err != nil {
		return fmt.Errorf("delete %s %q version %d: %w", kind, key, version, err)
	}
	return fsx.SyncDir(filepath.Dir(vs[i].File))
}

// ConnectorDeleter is implemented by providers that can delete a
// connector as a whole (Ferry extension; upstream deletes one version at
// a time). *Store implements it; the HTTP provider does not.
type ConnectorDeleter interface {
	// DeleteConnector removes every version of a connector and its entry
	// in the active versions; ErrNotFound when there is nothing to remove.
	DeleteConnector(ctx context.Context, kind Kind, key string) error
}

var _ ConnectorDeleter = (*Store)(nil)

// DeleteConnector removes every version file of a connector, including
// files that name it but failed to load, and its entry in
// .active_versions.toml, so that it does not come back when the runtime
// next loads the directory. Files go first: if removing one fails, the
// active entry stays and the error says which file is left.
func (s *Store) DeleteConnector(ctx context.Context, kind Kind, key string) error {
	if err := checkKindKey(kind, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, av, err := s.read(ctx)
	if err != nil {
		return err
	}
	var files []string
	for _, c := range sc.versions[connID{kind, key}] {
		files = append(files, c.File)
	}
	for _, le := range sc.errs {
		if le.Type == kind && le.Key == key {
			files = append(files, le.File)
		}
	}
	_, recorded := av.m(kind)[key]
	if len(files) == 0 && !recorded {
		return notFound(kind, key, nil)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s %q: %w", kind, key, err)
		}
		if err := fsx.SyncDir(filepath.Dir(f)); err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, key, err)
		}
	}
	// The connector's entry goes from each active versions file that
	// records it: the run directory's, and config_dir's when asked to
	// delete a connector listed there.
	for _, path := range s.activePaths() {
		a, err := s.readActiveFile(path)
		if err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, key, err)
		}
		if _, ok := a.m(kind)[key]; !ok {
			continue
		}
		delete(a.m(kind), key)
		if err := s.writeActiveFile(path, a); err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, key, err)
		}
	}
	return nil
}
