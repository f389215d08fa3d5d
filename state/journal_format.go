package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The journal's on-disk format, version 1. All integers little endian.
//
// The file starts with an 8-byte header:
//
//	offset size field
//	     0    4 magic "FRJL"
//	     4    2 format version (1)
//	     6    2 flags (reserved, must be 0)
//
// followed by records, each:
//
//	offset size field
//	     0    4 CRC-32C (Castagnoli) of bytes 4..end of the record
//	     4    1 kind: 1 = put (the key's state is now data), 2 = delete
//	     5    1 key length k (1..MaxKeyLen; the key passes ValidateKey)
//	     6    4 data length n (<= MaxStateSize; 0 for a delete)
//	    10    8 state version counter (>= 1 for a put, 0 for a delete)
//	    18    k key
//	  18+k    n data
//
// Replaying the records in order gives the state of every key: the last put
// of a key that no later delete removed. The header is written atomically
// (temp file and rename) when the journal is created or compacted; records
// are appended. A record that fails to decode and is followed by nothing
// that decodes is a torn append (a crash before the data sync that would
// have acknowledged it) and is cut off; one followed by a good record is
// corruption.
//
// Changing the format: add a new format version, keep decoding every older
// one, write only the newest, and add seeds to testdata/fuzz/FuzzJournal.
const (
	journalMagic         = "FRJL"
	journalFormatVersion = 1
	journalHeaderSize    = 8
	recordHeaderSize     = 18

	recordPut    = 1
	recordDelete = 2
)

// journalHeader returns the bytes a new journal starts with.
func journalHeader() []byte {
	b := make([]byte, journalHeaderSize)
	copy(b, journalMagic)
	binary.LittleEndian.PutUint16(b[4:6], journalFormatVersion)
	return b
}

// record is one decoded journal record; data aliases the input.
type record struct {
	kind    byte
	key     string
	version uint64
	data    []byte
}

// encodeRecord returns the bytes of one record.
func encodeRecord(kind byte, key string, version uint64, data []byte) []byte {
	b := make([]byte, recordHeaderSize+len(key)+len(data))
	b[4] = kind
	b[5] = byte(len(key))
	binary.LittleEndian.PutUint32(b[6:10], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[10:18], version)
	copy(b[recordHeaderSize:], key)
	copy(b[recordHeaderSize+len(key):], data)
	binary.LittleEndian.PutUint32(b[0:4], crc32.Checksum(b[4:], castagnoli))
	return b
}

// recordData returns the data of an encoded put record.
func recordData(rec []byte) []byte { return rec[recordHeaderSize+int(rec[5]):] }

// errShortRecord is wrapped by decodeRecord when b ends inside the record.
var errShortRecord = errors.New("truncated record")

// decodeRecord decodes the record at the start of b and returns it and its
// length. It never panics; errors say which field is wrong.
func decodeRecord(b []byte) (record, int, error) {
	if len(b) < recordHeaderSize {
		return record{}, 0, fmt.Errorf("%w: %d bytes, the record header alone is %d", errShortRecord, len(b), recordHeaderSize)
	}
	kind, k := b[4], int(b[5])
	n := binary.LittleEndian.Uint32(b[6:10])
	version := binary.LittleEndian.Uint64(b[10:18])
	switch {
	case kind != recordPut && kind != recordDelete:
		return record{}, 0, fmt.Errorf("unknown record kind %d", kind)
	case k == 0 || k > MaxKeyLen:
		return record{}, 0, fmt.Errorf("key length %d, want 1..%d", k, MaxKeyLen)
	case n > MaxStateSize:
		return record{}, 0, fmt.Errorf("data length %d exceeds the limit of %d", n, MaxStateSize)
	}
	size := recordHeaderSize + k + int(n)
	if len(b) < size {
		return record{}, 0, fmt.Errorf("%w: header says %d bytes, %d remain", errShortRecord, size, len(b))
	}
	if want, got := binary.LittleEndian.Uint32(b[0:4]), crc32.Checksum(b[4:size], castagnoli); want != got {
		return record{}, 0, fmt.Errorf("checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	r := record{kind: kind, key: string(b[recordHeaderSize : recordHeaderSize+k]), version: version, data: b[recordHeaderSize+k : size]}
	if err := ValidateKey(r.key); err != nil {
		return record{}, 0, fmt.Errorf("record key: %w", err)
	}
	switch {
	case kind == recordPut && version == 0:
		return record{}, 0, errors.New("put record with state version 0 (versions start at 1)")
	case kind == recordDelete && (version != 0 || n != 0):
		return record{}, 0, fmt.Errorf("delete record with version %d and %d data bytes, want 0 and 0", version, n)
	}
	return r, size, nil
}

// journalError says where in a journal decoding failed.
type journalError struct {
	Offset int64
	Err    error
}

func (e *journalError) Error() string { return fmt.Sprintf("at byte offset %d: %v", e.Offset, e.Err) }
func (e *journalError) Unwrap() error { return e.Err }

// decodeJournal replays the journal bytes b. It returns each live key's
// last put record (aliasing b) and the length of the good prefix: len(b),
// or the offset of a torn last record the caller should cut off. A bad
// header, or a bad record followed by one that decodes, is a
// *journalError. It never panics.
func decodeJournal(b []byte) (live map[string][]byte, end int, err error) {
	if len(b) < journalHeaderSize {
		return nil, 0, &journalError{0, fmt.Errorf("%d bytes, the journal header alone is %d", len(b), journalHeaderSize)}
	}
	switch {
	case string(b[0:4]) != journalMagic:
		return nil, 0, &journalError{0, fmt.Errorf("bad magic %q, want %q (not a Ferry state journal)", b[0:4], journalMagic)}
	case binary.LittleEndian.Uint16(b[4:6]) != journalFormatVersion:
		return nil, 0, &journalError{4, fmt.Errorf("unsupported format version %d (this build reads %d)", binary.LittleEndian.Uint16(b[4:6]), journalFormatVersion)}
	case binary.LittleEndian.Uint16(b[6:8]) != 0:
		return nil, 0, &journalError{6, fmt.Errorf("reserved flags set: %#04x", binary.LittleEndian.Uint16(b[6:8]))}
	}
	live = map[string][]byte{}
	off := journalHeaderSize
	for off < len(b) {
		r, n, err := decodeRecord(b[off:])
		if err != nil {
			if p := nextRecord(b, off+1); p >= 0 {
				return nil, 0, &journalError{int64(off), fmt.Errorf("%w (and a good record follows at byte offset %d)", err, p)}
			}
			return live, off, nil // torn tail: never acknowledged
		}
		if r.kind == recordPut {
			live[r.key] = b[off : off+n]
		} else {
			delete(live, r.key)
		}
		off += n
	}
	return live, off, nil
}

// nextRecord returns the first offset at or after from where a record
// decodes, or -1.
func nextRecord(b []byte, from int) int {
	for p := from; p+recordHeaderSize <= len(b); p++ {
		if k := b[p+5]; (b[p+4] != recordPut && b[p+4] != recordDelete) || k == 0 || int(k) > MaxKeyLen {
			continue // cheap rejection before the checksum
		}
		if _, _, err := decodeRecord(b[p:]); err == nil {
			return p
		}
	}
	return -1
}
