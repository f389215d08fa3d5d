package apitoken

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/internal/fsx"
)

// ErrNoToken is returned by Read when no runtime has written a token for
// the address.
var ErrNoToken = errors.New("no local API token")

// Dir is the directory of the current user's tokens:
// os.UserConfigDir()/ferry/api.
func Dir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("local API token: %w", err)
	}
	return filepath.Join(base, "ferry", "api"), nil
}

// New returns a fresh random token.
func New() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// FileName is the token file's name for an API address (host:port).
func FileName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if isLocal(host) {
		host = "localhost"
	}
	name := host
	if port != "" {
		name += "_" + port
	}
	return sanitize(name) + ".token"
}

func isLocal(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// sanitize keeps letters, digits, '.', '-' and '_'; anything else (the
// ':' of IPv6 addresses, a '/') becomes '_'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// Write stores token as the token of addr in dir and returns the file's
// path. It creates dir (mode 0700) and refuses one that another user owns
// or that others can write to.
func Write(dir, addr, token string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("local API token: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return "", fmt.Errorf("local API token: %w", err)
	}
	path := filepath.Join(dir, FileName(addr))
	if err := fsx.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("local API token: %w", err)
	}
	return path, nil
}

// Read returns the token of addr from dir; an error wrapping ErrNoToken
// when there is none.
func Read(dir, addr string) (string, error) {
	path := filepath.Join(dir, FileName(addr))
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w for %s (%s does not exist)", ErrNoToken, addr, path)
	}
	if err != nil {
		return "", fmt.Errorf("local API token: %w", err)
	}
	tok := string(bytes.TrimSpace(data))
	if tok == "" {
		return "", fmt.Errorf("%w for %s (%s is empty)", ErrNoToken, addr, path)
	}
	return tok, nil
}

// Remove deletes the token file at path if it still holds token (a
// runtime started since may have written its own).
func Remove(path, token string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local API token: %w", err)
	}
	if string(bytes.TrimSpace(data)) != token {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local API token: %w", err)
	}
	return nil
}
