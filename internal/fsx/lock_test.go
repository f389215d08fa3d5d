//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsx

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLockDirIsExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := LockDir(dir, "LOCK", 0o600)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "LOCK"))

	_, err = LockDir(dir, "LOCK", 0o600)
	require.ErrorIs(t, err, ErrLocked)
	require.EqualError(t, err, "directory is in use: "+filepath.Join(dir, "LOCK")+
		" is locked by another process (or another open of the directory in this one)")

	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close is idempotent")
	l, err = LockDir(dir, "LOCK", 0o600)
	require.NoError(t, err, "Close released the lock")
	require.NoError(t, l.Close())

	_, err = LockDir(filepath.Join(dir, "missing"), "LOCK", 0o600)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, ErrLocked)
}

// TestLockDirWaitsForAForkedChild: a child holds a copy of the lock's
// descriptor after this process released its own, as a child forked by
// the exec sink does until it execs. LockDir must not fail on it: it
// retries until the child lets go.
func TestLockDirWaitsForAForkedChild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := LockDir(dir, "LOCK", 0o644)
	require.NoError(t, err)

	child := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$")
	child.Env = append(os.Environ(), "FSX_LOCK_HOLDER=1")
	child.ExtraFiles = []*os.File{l.f} // the child's descriptor 3: the same lock
	release, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	require.NoError(t, l.Close(), "this process lets go; the child still holds the lock")

	busy := 0
	l, err = lockDir(dir, "LOCK", 0o644, time.Minute, func() {
		if busy++; busy == 1 {
			require.NoError(t, release.Close()) // the child exits, and the lock is free
		}
	})
	require.NoError(t, err)
	require.Positive(t, busy, "the first try found the lock held by the child")
	require.NoError(t, child.Wait())
	require.NoError(t, l.Close())
}

// TestLockHolderProcess is the child of TestLockDirWaitsForAForkedChild:
// it holds its inherited descriptors until its stdin closes.
func TestLockHolderProcess(t *testing.T) {
	if os.Getenv("FSX_LOCK_HOLDER") != "1" {
		t.Skip("run as a child by TestLockDirWaitsForAForkedChild")
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
