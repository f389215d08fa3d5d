package wire

import "fmt"

// Protocol version 0.11.0, packed as major<<20 | minor<<10 | patch.
const ProtocolVersion uint32 = 0<<20 | 11<<10 | 0

// PackVersion packs a semantic version, 10 bits per part.
func PackVersion(major, minor, patch uint32) uint32 {
	return (major&0x3ff)<<20 | (minor&0x3ff)<<10 | patch&0x3ff
}

// FormatVersion renders a packed version as "major.minor.patch".
func FormatVersion(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>20&0x3ff, v>>10&0x3ff, v&0x3ff)
}

// VersionCompatible applies the server's gate: the client version is at
// least the server's major.minor.0 and not of a newer major.minor.
func VersionCompatible(client, server uint32) bool {
	min := server &^ 0x3ff
	return client >= min && client>>10 <= server>>10
}

// Register is the body of LoginRegister (code 40): a username and password.
type Register struct {
	ProtocolVersion uint32
	SDKName         string
	SDKVersion      string
	Username        string
	Password        string
	Context         []byte
}

// AppendTo implements Encodable.
func (r *Register) AppendTo(b []byte) []byte {
	b = appendU32(b, r.ProtocolVersion)
	b = appendString8(b, r.SDKName)
	b = appendString8(b, r.SDKVersion)
	b = appendString8(b, r.Username)
	b = appendString8(b, r.Password)
	b = appendU32(b, uint32(len(r.Context)))
	return append(b, r.Context...)
}

// DecodeFrom implements Decodable. Trailing bytes after the context are
// ignored, as upstream does.
func (r *Register) DecodeFrom(d *Decoder) {
	r.ProtocolVersion = d.U32("protocol version")
	r.SDKName = d.String8("sdk name")
	r.SDKVersion = d.String8("sdk version")
	r.Username = d.Name("username")
	r.Password = d.String8("password")
	r.Context = d.Bytes(int(d.U32("context length")), "context")
	d.Rest()
}

// RegisterPAT is the body of LoginRegisterWithPat (code 45).
type RegisterPAT struct {
	ProtocolVersion uint32
	SDKName         string
	SDKVersion      string
	Token           string
	Context         []byte
}

// AppendTo implements Encodable.
func (r *RegisterPAT) AppendTo(b []byte) []byte {
	b = appendU32(b, r.ProtocolVersion)
	b = appendString8(b, r.SDKName)
	b = appendString8(b, r.SDKVersion)
	b = appendString8(b, r.Token)
	b = appendU32(b, uint32(len(r.Context)))
	return append(b, r.Context...)
}

// DecodeFrom implements Decodable.
func (r *RegisterPAT) DecodeFrom(d *Decoder) {
	r.ProtocolVersion = d.U32("protocol version")
	r.SDKName = d.String8("sdk name")
	r.SDKVersion = d.String8("sdk version")
	r.Token = d.Name("token")
	r.Context = d.Bytes(int(d.U32("context length")), "context")
	d.Rest()
}

// DecodeRegisterBody reads a Register body the way the server does: it
// tries the username/password shape first, then the token shape, and does
// not look at the command code. Exactly one of the results is non-nil.
func DecodeRegisterBody(b []byte) (*Register, *RegisterPAT, error) {
	var r Register
	if err := DecodeRequest(b, &r); err == nil {
		return &r, nil, nil
	}
	var p RegisterPAT
	if err := DecodeRequest(b, &p); err != nil {
		return nil, nil, fmt.Errorf("login body is neither a password nor a token login: %w", err)
	}
	return nil, &p, nil
}

// RegisterReply is the payload of a successful Register reply, after the
// result section.
type RegisterReply struct {
	UserID          uint32
	Session         uint64
	ProtocolVersion uint32
	ServerVersion   string
}

// AppendTo implements Encodable.
func (r *RegisterReply) AppendTo(b []byte) []byte {
	b = appendU32(b, r.UserID)
	b = appendU64(b, r.Session)
	b = appendU32(b, r.ProtocolVersion)
	return appendString8(b, r.ServerVersion)
}

// DecodeFrom implements Decodable.
func (r *RegisterReply) DecodeFrom(d *Decoder) {
	r.UserID = d.U32("user id")
	r.Session = d.U64("session")
	r.ProtocolVersion = d.U32("protocol version")
	r.ServerVersion = d.String8("server version")
	if d.Err() == nil && r.Session == 0 {
		d.Failf("session is zero")
	}
	d.Rest()
}

// Result sections: metadata replies start with [count u32] and count
// {index u32, result u32} entries. Success is count 0 followed by the
// payload; a committed rejection is count 1 with the error code.

// AppendResultOK appends an empty result section (success).
func AppendResultOK(b []byte) []byte { return appendU32(b, 0) }

// AppendResultErr appends a result section with one rejection.
func AppendResultErr(b []byte, code Code) []byte {
	b = appendU32(b, 1)
	b = appendU32(b, 0)
	return appendU32(b, uint32(code))
}

// SplitResult reads the result section of a framed reply body. It returns
// the payload after the section and the first entry's code (0 = success).
func SplitResult(body []byte) (payload []byte, code Code, err error) {
	d := NewDecoder(body)
	n := d.U32("result count")
	if d.Err() != nil {
		return nil, 0, d.Err()
	}
	if uint64(n)*8 > uint64(d.Remaining()) {
		return nil, 0, fmt.Errorf("%w: result section declares %d entries, %d bytes left", ErrMalformed, n, d.Remaining())
	}
	for i := uint32(0); i < n; i++ {
		d.U32("result index")
		if c := Code(d.U32("result code")); code == 0 {
			code = c
		}
	}
	return d.Rest(), code, nil
}
