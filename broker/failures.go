package broker

// Internal failures and the codes clients get for them. The protocol
// carries a code and no text (fact sheet §2.7), so the code must say what
// happened: a write that failed because the disk is full (ENOSPC,
// EDQUOT), read-only (EROFS) or failing (EIO) answers the nearest
// upstream code, 4006 CannotSaveMessagesToSegment for an append to a
// partition log and 10006 CannotWriteToFile for metadata, offsets and
// partition files, whose text in package wire says the disk is full or
// failing; the log says which. Any other internal failure answers 1
// (Error).

import (
	"errors"
	"syscall"

	"github.com/ferryhq/ferry/iggy/wire"
)

// diskFaults are the storage conditions a client is told about, with the
// words the log uses for them.
var diskFaults = []struct {
	errno syscall.Errno
	what  string
}{
	{syscall.ENOSPC, "the disk is full"},
	{syscall.EDQUOT, "the disk quota is exhausted (the disk is full for this user)"},
	{syscall.EROFS, "the file system is read-only"},
	{syscall.EIO, "the disk is failing (I/O error)"},
}

// diskFault says which of diskFaults is behind err, if any.
func diskFault(err error) (string, bool) {
	for _, f := range diskFaults {
		if errors.Is(err, f.errno) {
			return f.what, true
		}
	}
	return "", false
}

// failed logs an internal failure and answers status 1 (Error). Failed
// writes go through writeFailed or appendFailed instead.
func (b *Broker) failed(what string, err error) reply {
	b.log.Error(what+" failed", "err", err)
	return status(wire.ErrError.Code)
}

// writeFailed answers a failed write of metadata, consumer offsets or
// partition files: 10006 for a disk fault, else 1.
func (b *Broker) writeFailed(what string, err error) reply {
	return b.storageFailed(what, err, wire.ErrCannotWriteToFile)
}

// appendFailed answers a failed append to a partition log: 4006 for a
// disk fault, else 1.
func (b *Broker) appendFailed(err error) reply {
	return b.storageFailed("append", err, wire.ErrCannotSaveMessagesToSegment)
}

func (b *Broker) storageFailed(what string, err error, code *wire.Error) reply {
	fault, ok := diskFault(err)
	if !ok {
		return b.failed(what, err)
	}
	b.log.Error(what+" failed: "+fault, "err", err, "code", code.Code)
	return status(code.Code)
}
