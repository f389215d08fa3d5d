package live

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/internal/fsx"
)

// Store keeps a Target's state between runs: what it published, so a
// restarted program publishes only real changes. The state is one small
// blob (JSON); Save replaces it whole.
type Store interface {
	// Load returns the blob last saved, or nil and no error when nothing
	// has been saved yet.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the blob. It must be atomic: after a crash, Load
	// returns the old blob or the new one, never a mix.
	Save(ctx context.Context, data []byte) error
}

// FileStore keeps the state in the file at path, mode 0600. Save replaces
// it durably (fsx.WriteFile: a temporary file next to it, fsynced, renamed
// over path, the directory fsynced), so a crash leaves the old state or
// the new one. The directory must exist.
func FileStore(path string) Store { return fileStore{path: path} }

type fileStore struct{ path string }

func (s fileStore) Load(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("live: reading target state: %w", err)
	}
	return b, nil
}

func (s fileStore) Save(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fsx.WriteFile(s.path, data, 0o600); err != nil {
		return fmt.Errorf("live: writing target state: %w", err)
	}
	return nil
}

// MemoryStore keeps the state in memory: for tests, and for programs
// whose targets need not survive them.
type MemoryStore struct {
	mu   sync.Mutex
	data []byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Load returns a copy of the saved blob.
func (s *MemoryStore) Load(context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data), nil
}

// Save keeps a copy of data.
func (s *MemoryStore) Save(_ context.Context, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = bytes.Clone(data)
	return nil
}

// ErrCorruptState is wrapped by errors about a state blob that does not
// decode.
var ErrCorruptState = errors.New("live: target state is corrupt")

// ErrStateMismatch is wrapped when a state blob belongs to another target
// (another stream, topic or partition).
var ErrStateMismatch = errors.New("live: target state belongs to another target")

// stateFormat is the version of the state blob's layout. A change of
// layout adds a version and keeps reading the old ones.
const stateFormat = 1

// targetState is the state blob: the target it belongs to and, per key
// published, the SHA-256 of the value last published.
type targetState struct {
	Format    int        `json:"format"`
	Server    string     `json:"server,omitempty"` // informational
	Stream    string     `json:"stream"`
	Topic     string     `json:"topic"`
	Partition uint32     `json:"partition"`
	Keys      []stateKey `json:"keys"`
}

// stateKey is one published key: exactly one of Key (a string key) and
// Bin (a binary key, base64 in JSON) is set.
type stateKey struct {
	Key  string `json:"key,omitempty"`
	Bin  []byte `json:"bin,omitempty"`
	Hash []byte `json:"sha256"`
}

type fingerprint [32]byte

// encodeState renders published as a state blob, keys in order.
func encodeState(st targetState, published map[Key]fingerprint) ([]byte, error) {
	st.Format = stateFormat
	st.Keys = make([]stateKey, 0, len(published))
	for _, k := range sortedKeys(published) {
		fp := published[k]
		sk := stateKey{Hash: fp[:]}
		if k.Binary {
			sk.Bin = []byte(k.Name)
		} else {
			sk.Key = k.Name
		}
		st.Keys = append(st.Keys, sk)
	}
	return json.MarshalIndent(st, "", " ")
}

// decodeState reads a state blob; nil or empty is the empty state.
func decodeState(b []byte) (targetState, map[Key]fingerprint, error) {
	published := map[Key]fingerprint{}
	if len(bytes.TrimSpace(b)) == 0 {
		return targetState{}, published, nil
	}
	var st targetState
	if err := json.Unmarshal(b, &st); err != nil {
		return targetState{}, nil, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if st.Format != stateFormat {
		return targetState{}, nil, fmt.Errorf("%w: format %d, this version reads format %d", ErrCorruptState, st.Format, stateFormat)
	}
	for i, sk := range st.Keys {
		var k Key
		switch {
		case sk.Key != "" && len(sk.Bin) == 0:
			k = Key{Name: sk.Key}
		case sk.Key == "" && len(sk.Bin) > 0:
			k = Key{Name: string(sk.Bin), Binary: true}
		default:
			return targetState{}, nil, fmt.Errorf("%w: key %d: want exactly one of key and bin", ErrCorruptState, i)
		}
		if err := checkKey(k); err != nil {
			return targetState{}, nil, fmt.Errorf("%w: key %d: %w", ErrCorruptState, i, err)
		}
		if len(sk.Hash) != len(fingerprint{}) {
			return targetState{}, nil, fmt.Errorf("%w: key %s: sha256 is %d bytes, want %d", ErrCorruptState, k, len(sk.Hash), len(fingerprint{}))
		}
		if _, dup := published[k]; dup {
			return targetState{}, nil, fmt.Errorf("%w: key %s appears twice", ErrCorruptState, k)
		}
		published[k] = fingerprint(sk.Hash)
	}
	st.Keys = nil
	return st, published, nil
}

// sortedKeys returns the keys of m: string keys, then binary ones, each
// in byte order.
func sortedKeys[V any](m map[Key]V) []Key {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

func compareKeys(a, b Key) int {
	if a.Binary != b.Binary {
		if a.Binary {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.Name, b.Name)
}
