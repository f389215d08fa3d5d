package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The legacy state file format, version 1: one <key>.state file per key,
// as builds before the journal (journal_format.go) wrote them. OpenFile
// still reads these files, to migrate them into the journal; nothing writes
// them any more. All integers little endian.
//
//	offset size field
//	     0    4 magic "FRST"
//	     4    2 format version (1)
//	     6    2 flags (reserved, must be 0)
//	     8    8 state version counter (>= 1)
//	    16    4 data length n (<= MaxStateSize)
//	    20    4 CRC-32C (Castagnoli) of bytes 0..19 followed by the data
//	    24    n data
//
// The checksum covers the header too, so a flipped bit in the version counter
// or length is caught as well as one in the data. A file must be exactly
// 24+n bytes long; anything shorter is truncated, anything longer corrupt.
//
// Changing the format: add a new format version, keep decoding every older
// one (decodeFile switches on it), write only the newest, and add seeds for
// the new version to testdata/fuzz/FuzzDecodeFile.
const (
	fileMagic         = "FRST"
	fileFormatVersion = 1
	fileHeaderSize    = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errShortFile is wrapped by decodeFile when the input ends early.
var errShortFile = errors.New("truncated")

// encodeFile returns the file bytes for one state revision: the legacy
// files tests start from (the store itself no longer writes them).
func encodeFile(version uint64, data []byte) []byte {
	b := make([]byte, fileHeaderSize+len(data))
	copy(b[0:4], fileMagic)
	binary.LittleEndian.PutUint16(b[4:6], fileFormatVersion)
	binary.LittleEndian.PutUint16(b[6:8], 0)
	binary.LittleEndian.PutUint64(b[8:16], version)
	binary.LittleEndian.PutUint32(b[16:20], uint32(len(data)))
	copy(b[fileHeaderSize:], data)
	binary.LittleEndian.PutUint32(b[20:24], fileChecksum(b[:20], data))
	return b
}

func fileChecksum(head, data []byte) uint32 {
	return crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, data)
}

// decodeFile parses the bytes of a state file. The returned data aliases b.
// It never panics; errors say which field is wrong.
func decodeFile(b []byte) (version uint64, data []byte, err error) {
	if len(b) < fileHeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes, the header alone is %d", errShortFile, len(b), fileHeaderSize)
	}
	if string(b[0:4]) != fileMagic {
		return 0, nil, fmt.Errorf("bad magic %q, want %q (not a Ferry state file)", b[0:4], fileMagic)
	}
	if fv := binary.LittleEndian.Uint16(b[4:6]); fv != fileFormatVersion {
		return 0, nil, fmt.Errorf("unsupported format version %d (this build reads %d)", fv, fileFormatVersion)
	}
	if flags := binary.LittleEndian.Uint16(b[6:8]); flags != 0 {
		return 0, nil, fmt.Errorf("reserved flags set: %#04x", flags)
	}
	version = binary.LittleEndian.Uint64(b[8:16])
	n := binary.LittleEndian.Uint32(b[16:20])
	if n > MaxStateSize {
		return 0, nil, fmt.Errorf("data length %d exceeds the limit of %d", n, MaxStateSize)
	}
	switch body := len(b) - fileHeaderSize; {
	case body < int(n):
		return 0, nil, fmt.Errorf("%w: header says %d data bytes, file has %d", errShortFile, n, body)
	case body > int(n):
		return 0, nil, fmt.Errorf("%d bytes after the %d data bytes the header announces", body-int(n), n)
	}
	data = b[fileHeaderSize:]
	if want, got := binary.LittleEndian.Uint32(b[20:24]), fileChecksum(b[:20], data); want != got {
		return 0, nil, fmt.Errorf("checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	if version == 0 {
		return 0, nil, errors.New("state version 0 (versions start at 1)")
	}
	return version, data, nil
}
