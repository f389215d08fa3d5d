// Package fsx owns Ferry's one way of replacing a file durably: write a
// temporary file beside it, fsync it, rename it over the old one, fsync
// the directory. Readers see the old contents or the new, never a part,
// and after WriteFile returns the new contents survive a crash or a power
// loss.
//
// The standard library has the pieces (os.CreateTemp, File.Sync,
// os.Rename) but not the sequence, and getting the sequence slightly wrong
// (no directory fsync, a temporary file in another file system, the mode
// set after the rename) loses data only on the day of a crash; so it is
// written once, here.
package fsx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with permissions perm (not filtered
// by the umask). On error path is unchanged, or, if only the final
// directory fsync failed, already replaced.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, making the creation, renaming and removal
// of its entries durable. File systems that cannot sync a directory
// (os.ErrInvalid) are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
