package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Store keeps one opaque state blob per source key. Implementations are safe
// for concurrent use by multiple goroutines.
type Store interface {
	// Load returns the current state for key. It returns an error matching
	// ErrNotFound when no state has been saved for key yet.
	Load(ctx context.Context, key string) (State, error)

	// Save stores data for key if the stored version still equals expected,
	// and returns the new version. The zero Version means "no state must
	// exist yet". If the stored version differs (or state exists when
	// expected is zero, or is missing when expected is not), Save changes
	// nothing and returns an error matching ErrConflict. Save is atomic: a
	// crash leaves either the old or the new state. When Save returns an
	// error other than ErrConflict the write may or may not have happened;
	// Load tells.
	Save(ctx context.Context, key string, data []byte, expected Version) (Version, error)

	// Delete removes the state for key unconditionally. It returns an error
	// matching ErrNotFound when there was no state.
	Delete(ctx context.Context, key string) error

	// Close releases the store's resources. Calls after Close return an
	// error matching ErrClosed. Close is idempotent.
	Close() error
}

// State is one stored state blob and the version that identifies it.
type State struct {
	// Data is the blob exactly as it was saved. It belongs to the caller.
	Data []byte
	// Version identifies this revision; pass it to Save as expected.
	Version Version
}

// Version identifies one revision of a key's state. It is opaque: the file
// store uses a decimal counter starting at "1", the HTTP store the server's
// ETag. Versions are only compared for equality, and only with versions
// returned by the same kind of store. The zero value means "no state".
type Version string

// IsZero reports whether v is the zero Version ("no state").
func (v Version) IsZero() bool { return v == "" }

// Sentinel errors. Errors returned by stores wrap one of these (or context
// and I/O errors) with the key and the store involved.
var (
	// ErrNotFound: no state is stored for the key. Start from scratch.
	ErrNotFound = errors.New("state not found")
	// ErrConflict: the stored version is not the expected one; another
	// writer changed it. Load again before saving.
	ErrConflict = errors.New("state version conflict")
	// ErrInvalidKey: the key cannot be used as a state key. A configuration
	// error; retrying will not help.
	ErrInvalidKey = errors.New("invalid state key")
	// ErrCorrupt: the stored state cannot be decoded (bad checksum,
	// truncated, unknown format). Stop and ask the operator.
	ErrCorrupt = errors.New("state is corrupt")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("state store closed")
	// ErrTooLarge: the state is larger than MaxStateSize.
	ErrTooLarge = errors.New("state too large")
)

// MaxStateSize is the largest state blob, in bytes, that stores accept and
// return. State is a resume position, not data; 16 MiB is generous.
const MaxStateSize = 16 << 20

// MaxKeyLen is the longest key, in bytes. It leaves room for the file
// store's suffixes within the 255-byte file name limit of common file
// systems.
const MaxKeyLen = 200

// ConflictError is returned by Save when the stored version is not the
// expected one. It matches ErrConflict.
type ConflictError struct {
	Key      string
	Expected Version // what the caller passed ("" = must not exist)
	Actual   Version // what is stored ("" = nothing, or unknown for HTTP)
}

func (e *ConflictError) Error() string {
	exp := string(e.Expected)
	if e.Expected.IsZero() {
		exp = "none"
	}
	if e.Actual.IsZero() {
		return fmt.Sprintf("state %q: version conflict: expected %s", e.Key, exp)
	}
	return fmt.Sprintf("state %q: version conflict: expected %s, stored %s", e.Key, exp, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// KeyError says why a key was rejected. It matches ErrInvalidKey.
type KeyError struct {
	Key    string
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("invalid state key %q: %s", e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidKey) true.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// ValidateKey reports whether key can name a state. A key is a connector
// key: 1 to MaxKeyLen bytes of valid UTF-8, usable unchanged as a file name
// on common systems. It must not contain path separators (/ \), "..",
// control characters, or the characters < > : " | ? *, and must not start
// with "." (reserved for the file store's own files) or begin or end with a
// space. The error is a *KeyError matching ErrInvalidKey.
func ValidateKey(key string) error {
	bad := func(reason string) error { return &KeyError{Key: key, Reason: reason} }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("%d bytes long, the limit is %d", len(key), MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("not valid UTF-8")
	case strings.Contains(key, ".."):
		return bad(`contains ".."`)
	case key[0] == '.':
		return bad(`starts with "."`)
	case key[0] == ' ' || key[len(key)-1] == ' ':
		return bad("starts or ends with a space")
	}
	for i, r := range key {
		switch {
		case r == '/' || r == '\\':
			return bad(fmt.Sprintf("contains path separator %q at byte %d", r, i))
		case unicode.IsControl(r):
			return bad(fmt.Sprintf("contains control character %U at byte %d", r, i))
		case strings.ContainsRune(`<>:"|?*`, r):
			return bad(fmt.Sprintf("contains %q at byte %d, not allowed in file names", r, i))
		}
	}
	return nil
}
