package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame sizes.
const (
	HeaderSize = 256
	// MaxFrameSize is the largest frame (header included) either side
	// accepts, the upstream default of 64 MiB.
	MaxFrameSize = 64 << 20
)

// FrameKind is the command byte at header offset 60.
type FrameKind uint8

// Frame kinds a client sees. Other values are replica-to-replica.
const (
	FrameRequest  FrameKind = 5
	FrameReply    FrameKind = 8
	FrameEviction FrameKind = 13
	maxFrameKind  FrameKind = 29
)

// U128 is a little-endian 128-bit value: Lo is written first.
type U128 struct{ Lo, Hi uint64 }

// IsZero reports whether both halves are zero.
func (u U128) IsZero() bool { return u.Lo == 0 && u.Hi == 0 }

func getU128(b []byte) U128 {
	return U128{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

func putU128(b []byte, u U128) {
	binary.LittleEndian.PutUint64(b, u.Lo)
	binary.LittleEndian.PutUint64(b[8:], u.Hi)
}

// Prefix is the part of the header common to every frame kind that a
// locally built reply copies back from its request.
type Prefix struct {
	Cluster U128
	View    uint32
	Release uint32
	Replica uint8
}

func (p *Prefix) put(b []byte) {
	putU128(b[32:], p.Cluster)
	binary.LittleEndian.PutUint32(b[52:], p.View)
	binary.LittleEndian.PutUint32(b[56:], p.Release)
	b[61] = p.Replica
}

func (p *Prefix) get(b []byte) {
	p.Cluster = getU128(b[32:])
	p.View = binary.LittleEndian.Uint32(b[52:])
	p.Release = binary.LittleEndian.Uint32(b[56:])
	p.Replica = b[61]
}

// FrameSize returns the total size field of a header.
func FrameSize(h []byte) uint32 { return binary.LittleEndian.Uint32(h[48:]) }

// Kind returns the frame kind byte of a header.
func Kind(h []byte) FrameKind { return FrameKind(h[60]) }

// RequestHeader is the header of a client request (frame kind 5).
type RequestHeader struct {
	Prefix
	Size            uint32
	Client          U128
	RequestChecksum U128 // XXH3-64 of the body widened to 128 bits; zero = unchecked
	Timestamp       uint64
	Request         uint64
	Operation       Operation
	Session         uint64
	UserID          uint32
	Command         Command // only on the wire when Operation is OpNonReplicated
}

// Put writes h into b, which must hold HeaderSize bytes. Bytes not covered
// by a field are zeroed.
func (h *RequestHeader) Put(b []byte) {
	clear(b[:HeaderSize])
	h.Prefix.put(b)
	binary.LittleEndian.PutUint32(b[48:], h.Size)
	b[60] = byte(FrameRequest)
	putU128(b[128:], h.Client)
	putU128(b[144:], h.RequestChecksum)
	binary.LittleEndian.PutUint64(b[160:], h.Timestamp)
	binary.LittleEndian.PutUint64(b[168:], h.Request)
	b[176] = byte(h.Operation)
	binary.LittleEndian.PutUint64(b[184:], h.Session)
	binary.LittleEndian.PutUint32(b[192:], h.UserID)
	if h.Operation == OpNonReplicated {
		binary.LittleEndian.PutUint32(b[196:], uint32(h.Command))
	}
}

// DecodeRequestHeader reads a request header. It checks only the layout
// (length and frame kind); Validate applies the server's header rules.
func DecodeRequestHeader(b []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: request header is %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	if k := Kind(b); k != FrameRequest {
		return h, fmt.Errorf("%w: frame kind %d is not a request", ErrMalformed, k)
	}
	h.Prefix.get(b)
	h.Size = FrameSize(b)
	h.Client = getU128(b[128:])
	h.RequestChecksum = getU128(b[144:])
	h.Timestamp = binary.LittleEndian.Uint64(b[160:])
	h.Request = binary.LittleEndian.Uint64(b[168:])
	h.Operation = Operation(b[176])
	h.Session = binary.LittleEndian.Uint64(b[184:])
	h.UserID = binary.LittleEndian.Uint32(b[192:])
	if h.Operation == OpNonReplicated {
		h.Command = Command(binary.LittleEndian.Uint32(b[196:]))
	} else if c, ok := CommandFor(h.Operation); ok {
		h.Command = c
	}
	return h, nil
}

// ErrInvalidHeader is returned by RequestHeader.Validate. The upstream
// server drops such requests without a reply.
var ErrInvalidHeader = errors.New("invalid request header")

// Validate applies the server's request-header rules: a non-zero client id,
// a defined operation; Register with session 0 and request 0; every other
// operation except NonReplicated with session > 0 and request > 0.
func (h *RequestHeader) Validate() error {
	switch {
	case h.Client.IsZero():
		return fmt.Errorf("%w: client id is zero", ErrInvalidHeader)
	case !h.Operation.Valid():
		return fmt.Errorf("%w: operation %d is not defined", ErrInvalidHeader, h.Operation)
	case h.Operation == OpRegister:
		if h.Session != 0 || h.Request != 0 {
			return fmt.Errorf("%w: register needs session 0 and request 0", ErrInvalidHeader)
		}
	case h.Operation != OpNonReplicated:
		if h.Session == 0 || h.Request == 0 {
			return fmt.Errorf("%w: %s needs a session and a request id", ErrInvalidHeader, h.Operation)
		}
	}
	return nil
}

// ReplyHeader is the header of a server reply (frame kind 8).
type ReplyHeader struct {
	Prefix
	Size            uint32
	RequestChecksum U128
	Context         U128
	Client          U128
	Op              uint64
	Commit          uint64
	Timestamp       uint64
	Request         uint64
	Operation       Operation
	Status          Code
}

// Put writes h into b, which must hold HeaderSize bytes.
func (h *ReplyHeader) Put(b []byte) {
	clear(b[:HeaderSize])
	h.Prefix.put(b)
	binary.LittleEndian.PutUint32(b[48:], h.Size)
	b[60] = byte(FrameReply)
	putU128(b[128:], h.RequestChecksum)
	putU128(b[144:], h.Context)
	putU128(b[160:], h.Client)
	binary.LittleEndian.PutUint64(b[176:], h.Op)
	binary.LittleEndian.PutUint64(b[184:], h.Commit)
	binary.LittleEndian.PutUint64(b[192:], h.Timestamp)
	binary.LittleEndian.PutUint64(b[200:], h.Request)
	b[208] = byte(h.Operation)
	binary.LittleEndian.PutUint32(b[216:], uint32(h.Status))
}

// DecodeReplyHeader reads a reply header.
func DecodeReplyHeader(b []byte) (ReplyHeader, error) {
	var h ReplyHeader
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: reply header is %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	if k := Kind(b); k != FrameReply {
		return h, fmt.Errorf("%w: frame kind %d is not a reply", ErrMalformed, k)
	}
	h.Prefix.get(b)
	h.Size = FrameSize(b)
	h.RequestChecksum = getU128(b[128:])
	h.Context = getU128(b[144:])
	h.Client = getU128(b[160:])
	h.Op = binary.LittleEndian.Uint64(b[176:])
	h.Commit = binary.LittleEndian.Uint64(b[184:])
	h.Timestamp = binary.LittleEndian.Uint64(b[192:])
	h.Request = binary.LittleEndian.Uint64(b[200:])
	h.Operation = Operation(b[208])
	h.Status = Code(binary.LittleEndian.Uint32(b[216:]))
	return h, nil
}

// EvictionReason says why the server ended a session (header offset 255).
type EvictionReason uint8

// Eviction reasons.
const (
	EvictNoSession               EvictionReason = 1
	EvictClientReleaseTooLow     EvictionReason = 2
	EvictClientReleaseTooHigh    EvictionReason = 3
	EvictInvalidRequestOperation EvictionReason = 4
	EvictInvalidRequestBody      EvictionReason = 5
	EvictInvalidRequestBodySize  EvictionReason = 6
	EvictSessionTooLow           EvictionReason = 7
	EvictSessionReleaseMismatch  EvictionReason = 8
	EvictInvalidCredentials      EvictionReason = 9
	EvictInvalidToken            EvictionReason = 10
	EvictUserInactive            EvictionReason = 11
	EvictSessionError            EvictionReason = 12
	EvictStaleClient             EvictionReason = 13
	EvictIncompatibleProtocol    EvictionReason = 14
	EvictMalformedLogin          EvictionReason = 15
)

var evictionNames = [...]string{
	1: "no session", 2: "client release too low", 3: "client release too high",
	4: "invalid request operation", 5: "invalid request body", 6: "invalid request body size",
	7: "session too low", 8: "session release mismatch", 9: "invalid credentials",
	10: "invalid token", 11: "user inactive", 12: "session error", 13: "stale client",
	14: "incompatible protocol", 15: "malformed login",
}

func (r EvictionReason) String() string {
	if int(r) < len(evictionNames) && evictionNames[r] != "" {
		return evictionNames[r]
	}
	return fmt.Sprintf("eviction reason %d", uint8(r))
}

// Code maps a reason to the error code a client reports, as the Go SDK does.
func (r EvictionReason) Code() Code {
	switch r {
	case EvictInvalidCredentials:
		return ErrInvalidCredentials.Code
	case EvictInvalidToken:
		return ErrInvalidPAT.Code
	case EvictNoSession, EvictSessionTooLow, EvictSessionReleaseMismatch, EvictUserInactive, EvictSessionError:
		return ErrUnauthenticated.Code
	case EvictStaleClient:
		return ErrStaleClient.Code
	case EvictIncompatibleProtocol:
		return ErrIncompatibleProtocolVersion.Code
	case EvictMalformedLogin:
		return ErrInvalidFormat.Code
	}
	return ErrInvalidCommand.Code
}

// Eviction is a session-terminal frame (kind 13, header only).
type Eviction struct {
	Prefix
	Client            U128
	ServerProtocolMax uint32 // only for EvictIncompatibleProtocol
	ServerProtocolMin uint32 // only for EvictIncompatibleProtocol
	Reason            EvictionReason
}

// Put writes e into b, which must hold HeaderSize bytes.
func (e *Eviction) Put(b []byte) {
	clear(b[:HeaderSize])
	e.Prefix.put(b)
	binary.LittleEndian.PutUint32(b[48:], HeaderSize)
	b[60] = byte(FrameEviction)
	putU128(b[128:], e.Client)
	binary.LittleEndian.PutUint32(b[144:], e.ServerProtocolMax)
	binary.LittleEndian.PutUint32(b[148:], e.ServerProtocolMin)
	b[255] = byte(e.Reason)
}

// DecodeEviction reads an eviction header.
func DecodeEviction(b []byte) (Eviction, error) {
	var e Eviction
	if len(b) < HeaderSize {
		return e, fmt.Errorf("%w: eviction is %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	if k := Kind(b); k != FrameEviction {
		return e, fmt.Errorf("%w: frame kind %d is not an eviction", ErrMalformed, k)
	}
	e.Prefix.get(b)
	e.Client = getU128(b[128:])
	e.ServerProtocolMax = binary.LittleEndian.Uint32(b[144:])
	e.ServerProtocolMin = binary.LittleEndian.Uint32(b[148:])
	e.Reason = EvictionReason(b[255])
	return e, nil
}

// EvictionError is the error a client reports when the server evicts it.
// It unwraps to the *Error for the reason's code.
type EvictionError struct {
	Reason EvictionReason
	Min    uint32
	Max    uint32
}

func (e *EvictionError) Error() string {
	if e.Reason == EvictIncompatibleProtocol {
		return fmt.Sprintf("evicted by the server: %s (server accepts %s..%s)",
			e.Reason, FormatVersion(e.Min), FormatVersion(e.Max))
	}
	return fmt.Sprintf("evicted by the server: %s", e.Reason)
}

func (e *EvictionError) Unwrap() error { return ErrorFor(e.Reason.Code()) }

// ErrFrameTooLarge and ErrFrameTooSmall describe a size field out of bounds;
// both sides close the connection on them.
var (
	ErrFrameTooLarge = errors.New("frame exceeds the maximum size")
	ErrFrameTooSmall = errors.New("frame is smaller than its header")
)

// ReadFrame reads one frame (header and body) from r into buf, growing it
// as needed, and returns the frame. limit bounds the size field (0 means
// MaxFrameSize). The returned slice aliases buf's storage.
//
// The buffer grows with the bytes that actually arrive (doubling from
// readChunk, never past the declared size), so a peer that declares a large
// frame and sends little costs little memory. A server reads its clients
// so; a client reads its server with ReadFrameSized.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	return readFrame(r, buf, limit, frameGrow)
}

// ReadFrameSized is ReadFrame for a peer trusted with memory up to limit
// (a client reading the server it chose): a buffer too small for the
// declared size is replaced at once by one of exactly that size, so a
// large reply is read with one allocation and no copy.
func ReadFrameSized(r io.Reader, buf []byte, limit int) ([]byte, error) {
	return readFrame(r, buf, limit, frameSized)
}

// ReadFrameFresh is ReadFrameSized into a new buffer of exactly the
// frame's size, which the caller may keep (a poll reply whose messages
// alias it); scratch, of at least HeaderSize bytes, holds the header
// meanwhile and is not referenced by the result.
func ReadFrameFresh(r io.Reader, scratch []byte, limit int) ([]byte, error) {
	return readFrame(r, scratch, limit, frameFresh)
}

// How readFrame sizes its buffer.
const (
	frameGrow  = iota // grow with the bytes that arrive (untrusted peer)
	frameSized        // buf if it is large enough, else exactly the size
	frameFresh        // always a new buffer of exactly the size
)

func readFrame(r io.Reader, buf []byte, limit int, mode int) ([]byte, error) {
	if limit <= 0 {
		limit = MaxFrameSize
	}
	if cap(buf) < HeaderSize {
		buf = make([]byte, HeaderSize, 4096)
	}
	buf = buf[:HeaderSize]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	size := int(FrameSize(buf))
	switch {
	case size < HeaderSize:
		return nil, fmt.Errorf("%w: size field %d", ErrFrameTooSmall, size)
	case size > limit:
		return nil, fmt.Errorf("%w: size field %d, limit %d", ErrFrameTooLarge, size, limit)
	case Kind(buf) > maxFrameKind:
		return nil, fmt.Errorf("%w: frame kind %d", ErrMalformed, Kind(buf))
	}
	if mode == frameFresh || (mode == frameSized && cap(buf) < size) {
		exact := make([]byte, HeaderSize, size)
		copy(exact, buf)
		buf = exact
	}
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), readChunk)))
			copy(grown, buf)
			buf = grown
		}
		want := min(size, cap(buf))
		if _, err := io.ReadFull(r, buf[len(buf):want]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = buf[:want]
	}
	return buf, nil
}

// readChunk is the first step by which ReadFrame grows a buffer: frames
// up to this size are read in one allocation.
const readChunk = 1 << 20
