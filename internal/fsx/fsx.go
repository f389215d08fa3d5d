// Package fsx owns Ferry's durable file operations: replacing a file
// atomically, syncing a directory, and locking a directory against a
// second user.
//
// # Replacing a file
//
// WriteFile (and Dir.WriteFile, ReplaceFile) writes a temporary file
// beside the target, fsyncs it, renames it over the target and fsyncs the
// directory. Readers see the old contents or the new, never a part, and
// once it returns the new contents survive a crash or a power loss. The
// temporary file is named "." + name + ".tmp-" + a random suffix; a crash
// before the rename leaves it behind, and IsTemp recognises it so that
// the owner of the directory can remove it when it opens.
//
// The standard library has the pieces (os.OpenFile, File.Sync,
// os.Rename) but not the sequence, and getting the sequence slightly
// wrong (no directory fsync, a temporary file in another file system, the
// mode set after the rename) loses data only on the day of a crash; so it
// is written once, here. A Dir does it through an os.Root, so a name can
// never reach outside the directory.
//
// # Locking a directory
//
// LockDir takes an exclusive lock on a directory through a lock file in
// it (flock(2) where the system has it), so that two processes never
// share a data directory. See LockDir for the retry it makes for a lock
// that a forked child holds for a moment.
package fsx

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile replaces path with data, with permissions perm (not filtered
// by the umask). On error path is unchanged, or, if only the final
// directory fsync failed, already replaced.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	_, err := replacePath(path, data, perm, false)
	return err
}

// ReplaceFile replaces path with data as WriteFile does and returns the
// new file, still open for writing with its offset at the end, for a
// caller that goes on appending to it (a journal after compaction). The
// file is nil if path was not replaced; an error with a non-nil file means
// the rename happened but the directory fsync failed.
func ReplaceFile(path string, data []byte, perm os.FileMode) (*os.File, error) {
	return replacePath(path, data, perm, true)
}

func replacePath(path string, data []byte, perm os.FileMode, keepOpen bool) (*os.File, error) {
	d, err := OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close() // read-only handles: closing them cannot lose data
	return d.replace(filepath.Base(path), data, perm, keepOpen)
}

// SyncDir fsyncs a directory, making the creation, renaming and removal
// of its entries durable. File systems that cannot sync a directory
// (os.ErrInvalid) are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	err = syncDir(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

func syncDir(d *os.File) error {
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// IsTemp reports whether name (a base name) is a temporary file of a
// replace that has not finished: one a crash left behind, or one being
// written right now.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpInfix)
}

const tmpInfix = ".tmp-"

// Dir is an open directory whose files are replaced durably. All access
// goes through an os.Root, so names cannot escape it. A Dir is safe for
// concurrent use; replacing one name from two goroutines at once leaves
// one of the two contents.
type Dir struct {
	root *os.Root
	f    *os.File // the directory itself, for fsync
}

// OpenDir opens the directory at path, which must exist.
func OpenDir(path string) (*Dir, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(".")
	if err != nil {
		_ = root.Close()
		return nil, err
	}
	return &Dir{root: root, f: f}, nil
}

// Root is the directory's os.Root, for reading and removing its files.
// It is closed by Close.
func (d *Dir) Root() *os.Root { return d.root }

// Path is the path the directory was opened with.
func (d *Dir) Path() string { return d.root.Name() }

func (d *Dir) path(name string) string { return filepath.Join(d.root.Name(), name) }

// WriteFile replaces the file name in d with data, with permissions perm
// (not filtered by the umask), as the package doc describes. On error the
// file is unchanged, or, if only the final directory fsync failed,
// already replaced.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode) error {
	_, err := d.replace(name, data, perm, false)
	return err
}

// ReplaceFile is WriteFile that returns the new file, still open for
// writing with its offset at the end; see the package function
// ReplaceFile.
func (d *Dir) ReplaceFile(name string, data []byte, perm os.FileMode) (*os.File, error) {
	return d.replace(name, data, perm, true)
}

// replace writes, syncs and renames; with keepOpen it returns the file
// (also when only the directory fsync failed), else nil.
func (d *Dir) replace(name string, data []byte, perm os.FileMode, keepOpen bool) (*os.File, error) {
	tmp := "." + name + tmpInfix + rand.Text()
	f, err := d.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", d.path(name), err)
	}
	if err = f.Chmod(perm); err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if !keepOpen || err != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = d.root.Rename(tmp, name)
	}
	if err != nil {
		if keepOpen {
			_ = f.Close() // closed already unless the rename failed
		}
		_ = d.root.Remove(tmp)
		return nil, fmt.Errorf("write %s: %w", d.path(name), err)
	}
	if !keepOpen {
		f = nil
	}
	return f, d.Sync()
}

// Sync fsyncs the directory, making the creation, renaming and removal of
// its entries durable. File systems that cannot sync a directory
// (os.ErrInvalid) are not an error.
func (d *Dir) Sync() error {
	if err := syncDir(d.f); err != nil {
		return fmt.Errorf("sync directory %s: %w", d.Path(), err)
	}
	return nil
}

// Close closes the directory and its root.
func (d *Dir) Close() error {
	return errors.Join(d.f.Close(), d.root.Close())
}
