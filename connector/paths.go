package connector

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Paths says where a connector may read and write files. The runtime
// fills it from its own configuration: its own files and directories
// (config_dir, config.toml, the state directory with the embedded
// broker's data) are Protected, and [connectors] allowed_dirs, when set,
// are the only directories connectors may use. A connector that reads or
// writes files named by its configuration checks every such path with
// Check before opening it; the zero Paths allows everything.
//
// Paths are compared after making them absolute and resolving symbolic
// links in the part that exists, so a link into a protected directory is
// refused like the directory itself. A link created between the check
// and the open is not caught; allowed_dirs that only the runtime's user
// can write to close that gap.
type Paths struct {
	// Protected are the runtime's own files and directories, with what
	// each is; nothing at or under them may be read or written.
	Protected []ProtectedPath
	// Allowed, when not empty, are the only directories under which
	// files may be read or written ([connectors] allowed_dirs).
	Allowed []string
}

// ProtectedPath is one of the runtime's own files or directories.
type ProtectedPath struct {
	Path string
	What string // such as "connector configuration directory (config_dir)"
}

// ErrPathNotAllowed is wrapped by the errors of Paths.Check.
var ErrPathNotAllowed = errors.New("path not allowed")

// Check returns nil when path may be read or written, else an error
// wrapping ErrPathNotAllowed (and marked Permanent) that names the path
// and the rule. The caller adds which setting named the path.
func (p Paths) Check(path string) error {
	if len(p.Protected) == 0 && len(p.Allowed) == 0 {
		return nil
	}
	real, err := resolve(path)
	if err != nil {
		return Permanent(fmt.Errorf("%s: %w: %v", path, ErrPathNotAllowed, err))
	}
	for _, pr := range p.Protected {
		root, err := resolve(pr.Path)
		if err != nil {
			continue
		}
		if within(real, root) {
			return Permanent(fmt.Errorf("%s is inside the runtime's %s %s: %w: connectors may not read or write the runtime's own files",
				path, pr.What, pr.Path, ErrPathNotAllowed))
		}
	}
	if len(p.Allowed) == 0 {
		return nil
	}
	for _, a := range p.Allowed {
		if root, err := resolve(a); err == nil && within(real, root) {
			return nil
		}
	}
	return Permanent(fmt.Errorf("%s is outside [connectors] allowed_dirs (%s): %w", path, strings.Join(p.Allowed, ", "), ErrPathNotAllowed))
}

// CheckPattern checks the directory a glob pattern starts from (the part
// before its first wildcard): nil when files under it may be read, at
// least in part. Each file the pattern matches is still checked with
// Check, since a protected directory may lie under an allowed one.
func (p Paths) CheckPattern(pattern string) error {
	dir := pattern
	if i := strings.IndexAny(pattern, `*?[`); i >= 0 {
		dir = filepath.Dir(pattern[:i] + "x")
	}
	return p.Check(dir)
}

// resolve makes path absolute and resolves the symbolic links of its
// longest existing prefix, as the system would when opening it (a ".."
// after a link leaves the link's target); the rest, which does not exist
// yet, is appended and must not contain "..", since a directory created
// there could make it point anywhere.
func resolve(path string) (string, error) { return resolveDepth(path, 0) }

func resolveDepth(path string, links int) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(path) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		path = wd + string(filepath.Separator) + path // not Join: cleaning would resolve ".." lexically
	}
	var rest []string
	for cur := path; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for _, r := range rest {
				if r == ".." {
					return "", errors.New(`".." after a directory that does not exist`)
				}
			}
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// A dangling link: opening with O_CREATE would create its
			// target, so the target is what is checked.
			if links >= 40 {
				return "", fmt.Errorf("%s: too many levels of symbolic links", path)
			}
			target, err := os.Readlink(cur)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = cur[:strings.LastIndexByte(cur, filepath.Separator)+1] + target
			}
			real, err := resolveDepth(target, links+1)
			if err != nil {
				return "", err
			}
			return resolveDepth(strings.Join(append([]string{real}, rest...), string(filepath.Separator)), links+1)
		}
		i := strings.LastIndexByte(strings.TrimRight(cur, string(filepath.Separator)), filepath.Separator)
		if i < 0 {
			return "", fmt.Errorf("%s: no existing directory in the path", path)
		}
		rest = append([]string{strings.TrimRight(cur[i+1:], string(filepath.Separator))}, rest...)
		cur = cur[:max(i, 1)] // keep "/" itself
	}
}

// within reports whether path is root or under it (both clean and absolute).
func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
