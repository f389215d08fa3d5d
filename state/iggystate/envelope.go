package iggystate

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/ferryhq/ferry/state"
)

// The envelope is the payload of every message of a state topic, format
// version 1, little endian:
//
//	magic    "FSTE"       4 bytes
//	version  u8           1
//	flags    u8           bit 0: deleted (a deletion marker)
//	epoch    u64          the writer's lease epoch (0 without a lease)
//	sequence u64          the key's save counter, per store of the epoch
//	key_len  u16, key     the state key, 1..state.MaxKeyLen bytes
//	data_len u32, data    the state blob, 0..state.MaxStateSize bytes
//	crc      u32          CRC-32C of everything before it
//
// A later format gets a new version byte; decoders refuse versions they
// do not know rather than guess.
const (
	envMagic    = "FSTE"
	envVersion  = 1
	flagDeleted = 1
	envFixed    = 4 + 1 + 1 + 8 + 8 + 2 + 4 + 4 // without key and data
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// envelope is one decoded state record.
type envelope struct {
	deleted bool
	epoch   uint64
	seq     uint64
	key     string
	data    []byte
}

// appendEnvelope appends e's encoding to b.
func appendEnvelope(b []byte, e envelope) []byte {
	start := len(b)
	b = append(b, envMagic...)
	var flags byte
	if e.deleted {
		flags |= flagDeleted
	}
	b = append(b, envVersion, flags)
	b = binary.LittleEndian.AppendUint64(b, e.epoch)
	b = binary.LittleEndian.AppendUint64(b, e.seq)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(e.key)))
	b = append(b, e.key...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.data)))
	b = append(b, e.data...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decodeEnvelope decodes one envelope. The data aliases p. Errors name
// what is wrong.
func decodeEnvelope(p []byte) (envelope, error) {
	var e envelope
	if len(p) < envFixed {
		return e, fmt.Errorf("state record is %d bytes, shorter than the %d-byte minimum", len(p), envFixed)
	}
	if string(p[:4]) != envMagic {
		return e, fmt.Errorf("state record does not start with %q", envMagic)
	}
	if p[4] != envVersion {
		return e, fmt.Errorf("state record format version %d, this build reads version %d", p[4], envVersion)
	}
	if p[5]&^flagDeleted != 0 {
		return e, fmt.Errorf("state record has unknown flags %#x", p[5])
	}
	body, sum := p[:len(p)-4], binary.LittleEndian.Uint32(p[len(p)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return e, fmt.Errorf("state record checksum %08x, computed %08x", sum, got)
	}
	e.deleted = p[5]&flagDeleted != 0
	e.epoch = binary.LittleEndian.Uint64(p[6:])
	e.seq = binary.LittleEndian.Uint64(p[14:])
	klen := int(binary.LittleEndian.Uint16(p[22:]))
	rest := body[24:]
	if klen == 0 || klen > state.MaxKeyLen || klen+4 > len(rest) {
		return envelope{}, fmt.Errorf("state record key length %d does not fit (1..%d, %d bytes left)", klen, state.MaxKeyLen, len(rest))
	}
	e.key = string(rest[:klen])
	rest = rest[klen:]
	dlen := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if dlen > state.MaxStateSize || int(dlen) != len(rest) {
		return envelope{}, fmt.Errorf("state record data length %d, %d bytes left (limit %d)", dlen, len(rest), state.MaxStateSize)
	}
	e.data = rest
	if e.deleted && dlen != 0 {
		return envelope{}, fmt.Errorf("state deletion marker carries %d bytes of data", dlen)
	}
	return e, nil
}
