package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// failingLog is a partition log whose appends fail with err, as the file
// log's do when a write(2) fails.
type failingLog struct {
	storage.Log
	err error
}

func (l failingLog) Append([]byte) error {
	return fmt.Errorf("storage: append to 00000000000000000000.log: %w",
		&os.PathError{Op: "write", Path: "00000000000000000000.log", Err: l.err})
}

// dialIggy logs the real client in to b.
func dialIggy(t *testing.T, b *Broker) (*iggy.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr(), iggy.WithoutReconnect())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, ctx
}

// sendToFailingLog creates stream 0 / topic 0 with one partition whose
// appends fail with errno, sends a message to it with the real client and
// returns the client's error.
func sendToFailingLog(t *testing.T, b *Broker, errno syscall.Errno) error {
	t.Helper()
	c, ctx := dialIggy(t, b)
	_, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NumericID(0), "t", 1)
	require.NoError(t, err)
	b.mu.RLock()
	p := b.streams[0].topics[0].parts[0]
	b.mu.RUnlock()
	p.mu.Lock()
	p.log = failingLog{Log: p.log, err: errno}
	p.mu.Unlock()
	_, err = c.SendMessages(ctx, iggy.NumericID(0), iggy.NumericID(0), iggy.ToPartition(0),
		[]iggy.Message{{Payload: []byte("m")}})
	return err
}

// A send that fails because the disk is full (or read-only, or failing)
// reaches the producer as 4006 CannotSaveMessagesToSegment, whose text
// says so, not as "iggy error 1, unspecified error".
func TestDiskFullSend(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		t.Run(errno.Error(), func(t *testing.T) {
			t.Parallel()
			b, _ := startInternal(t, Config{DataDir: t.TempDir()})
			err := sendToFailingLog(t, b, errno)
			require.ErrorIs(t, err, wire.ErrCannotSaveMessagesToSegment)
			require.Contains(t, err.Error(), "disk is full")
			require.Contains(t, err.Error(), "CannotSaveMessagesToSegment")
		})
	}
}

// A metadata write that fails the same way answers 10006
// CannotWriteToFile, and the change is not applied.
func TestDiskFullMetadata(t *testing.T) {
	t.Parallel()
	var full atomic.Bool
	write := func(path string, data []byte) error {
		if full.Load() {
			return fmt.Errorf("write %s: %w", path, &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC})
		}
		return writeFileAtomic(path, data)
	}
	b, _ := startInternal(t, Config{DataDir: t.TempDir(), writeMeta: write})
	c, ctx := dialIggy(t, b)
	_, err := c.CreateStream(ctx, "before")
	require.NoError(t, err)

	full.Store(true)
	_, err = c.CreateStream(ctx, "after")
	require.ErrorIs(t, err, wire.ErrCannotWriteToFile)
	require.Contains(t, err.Error(), "disk is full")
	var ie *iggy.Error
	require.True(t, errors.As(err, &ie))
	require.Equal(t, wire.Code(10006), ie.Code)

	full.Store(false)
	streams, err := c.ListStreams(ctx)
	require.NoError(t, err)
	require.Len(t, streams, 1, "the failed create was applied")
}

// Other internal failures still answer 1 (Error).
func TestOtherStorageFailureIsUnspecified(t *testing.T) {
	t.Parallel()
	b, _ := startInternal(t, Config{})
	require.ErrorIs(t, sendToFailingLog(t, b, syscall.EBADF), wire.ErrError)
}
