package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"
)

// Provider is where connector configurations live: a local directory
// (Store) or a remote HTTP API (HTTPProvider). Every version of a
// connector has a number; one version per connector is active, and the
// runtime runs the active ones.
type Provider interface {
	// Load returns the active version of every connector, and a LoadError
	// for each file or entry that could not be read; one broken file does
	// not stop the others. The error is for the provider as a whole.
	Load(ctx context.Context) (*ConnectorSet, error)
	// Versions lists the versions of a connector, lowest first.
	Versions(ctx context.Context, kind Kind, key string) ([]VersionInfo, error)
	// Get returns one version; ErrNotFound when it does not exist.
	Get(ctx context.Context, kind Kind, key string, version uint64) (*Connector, error)
	// Active returns the active version; ErrNotFound when there is none.
	Active(ctx context.Context, kind Kind, key string) (*Connector, error)
	// SetActive makes version the active one.
	SetActive(ctx context.Context, kind Kind, key string, version uint64) error
	// Create validates c and saves it as a new version (the next number
	// after the highest; c.Version is ignored). The new version does not
	// become active by itself unless no version was chosen explicitly.
	Create(ctx context.Context, c *Connector) (*Connector, error)
	// Delete removes a version; ErrActiveVersion for the active one.
	Delete(ctx context.Context, kind Kind, key string, version uint64) error
	// Close releases the provider's resources; it is idempotent.
	Close() error
}

// VersionInfo describes one version of a connector.
type VersionInfo struct {
	Version   uint64    `json:"version"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
}

// ConnectorSet is the result of loading: the connectors that loaded, and
// the ones that did not, each with the reason.
type ConnectorSet struct {
	// Connectors are the active versions, sources first, then by key.
	Connectors []*Connector
	// Errors are the files or entries that failed to load.
	Errors []*LoadError
	// Warnings do not stop anything, such as IGGY_CONNECTORS_* variables
	// that address no key of the connector they name.
	Warnings []string
}

// Get returns the loaded connector of that kind and key, or nil.
func (s *ConnectorSet) Get(kind Kind, key string) *Connector {
	for _, c := range s.Connectors {
		if c.Type == kind && c.Key == key {
			return c
		}
	}
	return nil
}

// LoadError is a connector that could not be loaded. Type and Key are
// filled when they could be read (Key falls back to the file name), so the
// runtime can show the connector with status Error and Err as the reason.
type LoadError struct {
	File string // the file or URL
	Type Kind   // "" when unknown
	Key  string
	Err  error
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("connector %s %q: %v", kindOrUnknown(e.Type), e.Key, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

func kindOrUnknown(k Kind) string {
	if k == "" {
		return "(unknown type)"
	}
	return string(k)
}

func (s *ConnectorSet) sort() {
	sort.SliceStable(s.Connectors, func(i, j int) bool {
		a, b := s.Connectors[i], s.Connectors[j]
		if a.Type != b.Type {
			return a.Type == KindSource
		}
		return a.Key < b.Key
	})
	sort.SliceStable(s.Errors, func(i, j int) bool { return s.Errors[i].File < s.Errors[j].File })
}

// NewProvider returns the provider the runtime configuration selects,
// reading connector overrides from the runtime's environment unless
// WithEnv says otherwise.
func NewProvider(rt *Runtime, opts ...Option) (Provider, error) {
	o := buildOptions(opts)
	if !o.envSet {
		opts = append([]Option{WithEnv(rt.Env())}, opts...)
	}
	switch rt.Connectors.ConfigType {
	case ProviderHTTP:
		return NewHTTPProvider(rt.Connectors, opts...)
	case ProviderLocal, "":
		// What the runtime creates goes under the state directory.
		return OpenStore(rt.Connectors.ConfigDir, append([]Option{WithRunDir(RunDir(rt))}, opts...)...)
	}
	return nil, fmt.Errorf("connectors.config_type %q: %w", rt.Connectors.ConfigType, ErrInvalid)
}

// RunDir is where the runtime of rt keeps the connector versions, hooks
// and active versions it creates: <state path>/connectors.
func RunDir(rt *Runtime) string {
	state := rt.State.Path
	if state == "" {
		state = "local_state"
	}
	return filepath.Join(state, "connectors")
}

func checkKindKey(kind Kind, key string) error {
	if kind != KindSource && kind != KindSink {
		return fmt.Errorf("connector type %q: expected \"source\" or \"sink\": %w", kind, ErrInvalid)
	}
	if !ValidKey(key) {
		return fmt.Errorf("connector key %q: expected 1 to 128 letters, digits, '-', '_' or '.': %w", key, ErrInvalid)
	}
	return nil
}

func notFound(kind Kind, key string, version *uint64) error {
	if version == nil {
		return fmt.Errorf("%s %q: %w", kind, key, ErrNotFound)
	}
	return fmt.Errorf("%s %q version %d: %w", kind, key, *version, ErrNotFound)
}

// IsNotFound reports whether err means the connector or version does not
// exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
