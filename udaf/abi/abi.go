// Package abi is the layout of Ferry's WebAssembly user-defined aggregate
// (UDAF) ABI, shared by the host (package udaf) and Go guests (package
// udaf/guest); it depends on the standard library only.
//
// A module exports ferry_alloc(size i32) -> address i32 and four
// functions (address i32, length i32) -> i64, each given one input the
// host wrote at an address ferry_alloc returned, and returning the
// address and length of its result packed as address<<32 | length:
//
//	udaf_init  input: nothing                    result: a group's empty state
//	udaf_add   input: AppendPair(state, payload) result: the new state
//	udaf_merge input: AppendPair(a, b)           result: the merged state
//	udaf_emit  input: state                      result: the output, JSON
//	udaf_add_all input: AppendList(state, payloads) result: the state with
//	             every payload added in order (one call for many adds)
//
// A pair is the first part's length (4 bytes, little-endian), the first
// part, then the second part to the end. A list is the state's length
// (4 bytes, little-endian) and the state, then per payload its length (4
// bytes, little-endian) and the payload. A result is Version (1 byte), a
// code (1 byte: OK or Failed), then the body: the bytes on OK, a UTF-8
// message on Failed. States are opaque to the host, which keeps them.
package abi

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Version is the version of the result layout, its first byte.
const Version = 1

// The exports of a UDAF module besides ferry_alloc.
const (
	InitExport  = "udaf_init"
	AddExport   = "udaf_add"
	MergeExport = "udaf_merge"
	EmitExport  = "udaf_emit"
	// AddAllExport is udaf_add_all: Add of many inputs in one call.
	AddAllExport = "udaf_add_all"
)

// Result codes.
const (
	OK     = 0
	Failed = 1
)

// MaxMessage is the longest error message the host keeps; a longer one is
// cut there.
const MaxMessage = 1024

// AppendPair appends the pair (a, b) to dst.
func AppendPair(dst, a, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(a)))
	dst = append(dst, a...)
	return append(dst, b...)
}

// SplitPair splits a pair; a and b alias p.
func SplitPair(p []byte) (a, b []byte, err error) {
	if len(p) < 4 {
		return nil, nil, fmt.Errorf("a pair of %d bytes, shorter than its 4-byte length", len(p))
	}
	n := binary.LittleEndian.Uint32(p)
	if uint64(n) > uint64(len(p)-4) {
		return nil, nil, fmt.Errorf("a pair's first part of %d bytes in %d bytes", n, len(p)-4)
	}
	return p[4 : 4+n], p[4+n:], nil
}

// AppendList appends the list (state, inputs) to dst.
func AppendList(dst, state []byte, inputs [][]byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(state)))
	dst = append(dst, state...)
	for _, in := range inputs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(in)))
		dst = append(dst, in...)
	}
	return dst
}

// ListSize is the length of AppendList(nil, state, inputs).
func ListSize(state []byte, inputs [][]byte) int {
	n := 4 + len(state)
	for _, in := range inputs {
		n += 4 + len(in)
	}
	return n
}

// SplitList splits a list; state and inputs alias p.
func SplitList(p []byte) (state []byte, inputs [][]byte, err error) {
	state, rest, err := SplitPair(p)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; len(rest) > 0; i++ {
		var in []byte
		if in, rest, err = SplitPair(rest); err != nil {
			return nil, nil, fmt.Errorf("the list's input %d: %w", i, err)
		}
		inputs = append(inputs, in)
	}
	return state, inputs, nil
}

// AppendResult appends a result with code and body to dst.
func AppendResult(dst []byte, code byte, body []byte) []byte {
	dst = append(dst, Version, code)
	return append(dst, body...)
}

// GuestError is an error the aggregate itself reported (code Failed).
type GuestError struct{ Message string }

func (e *GuestError) Error() string { return e.Message }

// DecodeResult returns the body of an OK result (aliasing p), a
// *GuestError for a Failed one, or an error saying how p is not a result.
func DecodeResult(p []byte) ([]byte, error) {
	if len(p) < 2 {
		return nil, fmt.Errorf("a result of %d bytes, shorter than its 2-byte head", len(p))
	}
	if p[0] != Version {
		return nil, fmt.Errorf("a result of layout version %d, want %d", p[0], Version)
	}
	switch p[1] {
	case OK:
		return p[2:], nil
	case Failed:
		return nil, &GuestError{Message: message(p[2:])}
	}
	return nil, fmt.Errorf("a result with the unknown code %d", p[1])
}

// message is an error body as text: valid UTF-8 (a rune cut at
// MaxMessage bytes becomes U+FFFD), one line, "no message" when empty.
func message(b []byte) string {
	s := strings.ToValidUTF8(string(b[:min(len(b), MaxMessage)]), "\uFFFD")
	if s = strings.Join(strings.Fields(s), " "); s == "" {
		return "no message"
	}
	return s
}
