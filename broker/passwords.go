package broker

// Passwords are stored only as salted argon2id hashes in PHC string form,
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>" (base64 without padding),
// upstream's choice and the parameters of its argon2 crate's defaults
// (OWASP's minimum for argon2id). golang.org/x/crypto/argon2 computes
// them; only the PHC framing is written here.
//
// A hash costs about 19 MiB and tens of milliseconds, on purpose, so that a
// stolen metadata.json is slow to attack. To keep reconnecting clients from
// paying it on every login, a password that verified is remembered as an
// HMAC-SHA256 under a key made at start and kept only in memory; the
// entry goes when the password changes or the user is deleted. A failed
// login always computes the full hash (and the login limiter slows the
// next one), and an unknown username computes one against a dummy hash,
// so the time of a login does not tell whether the user exists. At most
// GOMAXPROCS hashes run at once in the process (others wait their turn),
// so a flood of logins costs at most GOMAXPROCS × 19 MiB, not 19 MiB per
// connection.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters of new hashes.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Bounds on the parameters of a stored hash, so a tampered metadata file
// cannot make a login allocate gigabytes or spin for minutes.
const (
	maxArgonMemoryKiB = 1 << 20 // 1 GiB
	maxArgonTime      = 64
	maxArgonThreads   = 64
)

var b64 = base64.RawStdEncoding

// argonSlots bounds the argon2id computations running at once.
var argonSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// idKey is argon2.IDKey, one of at most cap(argonSlots) at a time.
func idKey(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	argonSlots <- struct{}{}
	defer func() { <-argonSlots }()
	return argon2.IDKey(password, salt, time, memory, threads, keyLen)
}

// hashPassword returns the PHC string of a new salted argon2id hash.
func hashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := idKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// phc is a parsed argon2id PHC string.
type phc struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// parsePHC parses and bounds-checks an argon2id PHC string.
func parsePHC(s string) (phc, error) {
	var h phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return h, errors.New("not an argon2id PHC string")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return h, fmt.Errorf("argon2id version %q, want v=%d", parts[2], argon2.Version)
	}
	var m, t, p uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return h, fmt.Errorf("argon2id parameters %q: %w", parts[3], err)
	}
	if m < 8 || m > maxArgonMemoryKiB || t < 1 || t > maxArgonTime || p < 1 || p > maxArgonThreads {
		return h, fmt.Errorf("argon2id parameters %q out of range", parts[3])
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 || len(salt) > 64 {
		return h, errors.New("argon2id salt is not 8..64 bytes of base64")
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return h, errors.New("argon2id hash is not 16..64 bytes of base64")
	}
	return phc{memory: m, time: t, threads: uint8(p), salt: salt, key: key}, nil
}

// verifyPassword reports whether password matches the stored PHC string.
func verifyPassword(stored, password string) bool {
	h, err := parsePHC(stored)
	if err != nil {
		return false
	}
	got := idKey([]byte(password), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(got, h.key) == 1
}

// dummyHash is verified against when a login names no user, so that the
// reply takes as long as for a user who exists.
var dummyHash = sync.OnceValue(func() string {
	h, err := hashPassword("no such user")
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return h
})

// verifiedPasswords remembers passwords that verified, as HMACs under a
// key of this process, so a repeated login skips argon2id.
type verifiedPasswords struct {
	key []byte
	mu  sync.Mutex
	m   map[uint32]verifiedEntry // by user id
}

type verifiedEntry struct {
	hash string // the PHC string the password verified against
	mac  [sha256.Size]byte
}

func newVerifiedPasswords() *verifiedPasswords {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &verifiedPasswords{key: key, m: map[uint32]verifiedEntry{}}
}

func (v *verifiedPasswords) mac(password string) (sum [sha256.Size]byte) {
	h := hmac.New(sha256.New, v.key)
	h.Write([]byte(password))
	h.Sum(sum[:0])
	return sum
}

// check reports whether password matches stored, from memory when it
// verified before against the same stored hash.
func (v *verifiedPasswords) check(user uint32, stored, password string) bool {
	mac := v.mac(password)
	v.mu.Lock()
	e, ok := v.m[user]
	v.mu.Unlock()
	if ok && e.hash == stored && hmac.Equal(e.mac[:], mac[:]) {
		return true
	}
	if !verifyPassword(stored, password) {
		return false
	}
	v.mu.Lock()
	v.m[user] = verifiedEntry{hash: stored, mac: mac}
	v.mu.Unlock()
	return true
}

// remember records that password matches stored (the broker has just
// hashed or verified it), so the first login with it skips argon2id too.
func (v *verifiedPasswords) remember(user uint32, stored, password string) {
	mac := v.mac(password)
	v.mu.Lock()
	v.m[user] = verifiedEntry{hash: stored, mac: mac}
	v.mu.Unlock()
}

// forget drops what is remembered of user's password.
func (v *verifiedPasswords) forget(user uint32) {
	v.mu.Lock()
	delete(v.m, user)
	v.mu.Unlock()
}
