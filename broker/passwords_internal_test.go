package broker

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/argon2"
)

var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)

func TestHashPasswordFormat(t *testing.T) {
	t.Parallel()
	h, err := hashPassword("secret")
	require.NoError(t, err)
	m := phcPattern.FindStringSubmatch(h)
	require.NotNil(t, m, "PHC string %q", h)
	salt, err := b64.DecodeString(m[1])
	require.NoError(t, err)
	require.Len(t, salt, 16)
	key, err := b64.DecodeString(m[2])
	require.NoError(t, err)
	require.Len(t, key, 32)

	p, err := parsePHC(h)
	require.NoError(t, err)
	require.Equal(t, phc{memory: 19456, time: 2, threads: 1, salt: salt, key: key}, p)

	require.True(t, verifyPassword(h, "secret"))
	require.False(t, verifyPassword(h, "Secret"))
	require.False(t, verifyPassword(h, ""))
	require.False(t, verifyPassword(h, "secret "))
	require.False(t, verifyPassword("not a hash", "secret"))

	again, err := hashPassword("secret")
	require.NoError(t, err)
	require.NotEqual(t, h, again, "each hash has its own salt")
	require.NotEqual(t, phcPattern.FindStringSubmatch(again)[1], m[1])
	require.True(t, verifyPassword(again, "secret"))

	// A tampered key or salt no longer verifies.
	k := []byte(m[2])
	k[0] ^= 'A' ^ 'B'
	if k[0] == m[2][0] {
		k[0] = 'C'
	}
	require.False(t, verifyPassword(strings.Replace(h, m[2], string(k), 1), "secret"))
}

// A stored hash with other (bounded) parameters verifies: the stored
// parameters, not the current ones, are used, and the key length is the
// stored key's.
func TestVerifyPasswordUsesStoredParameters(t *testing.T) {
	t.Parallel()
	salt := []byte("saltsaltsaltsalt")
	small := "$argon2id$v=19$m=64,t=1,p=1$" + b64.EncodeToString(salt) + "$" +
		b64.EncodeToString(argon2.IDKey([]byte("password"), salt, 1, 64, 1, 16))
	require.True(t, verifyPassword(small, "password"))
	require.False(t, verifyPassword(small, "passwore"))
	p, err := parsePHC(small)
	require.NoError(t, err)
	require.Equal(t, phc{memory: 64, time: 1, threads: 1, salt: salt, key: p.key}, p)
	require.Len(t, p.key, 16)
	// The same key under other parameters does not verify.
	require.False(t, verifyPassword(strings.Replace(small, "t=1", "t=2", 1), "password"))
}

func TestParsePHCRejects(t *testing.T) {
	t.Parallel()
	good, err := hashPassword("secret")
	require.NoError(t, err)
	parts := strings.Split(good, "$")
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	salt, key := parts[4], parts[5]
	for name, s := range map[string]string{
		"empty":              "",
		"not phc":            "secret",
		"argon2i":            with(1, "argon2i"),
		"argon2d":            with(1, "argon2d"),
		"bcrypt":             "$2b$10$" + salt + key,
		"version 16":         with(2, "v=16"),
		"no version":         with(2, "m=19456"),
		"memory over 1 GiB":  with(3, "m=1048577,t=2,p=1"),
		"memory u32 max":     with(3, "m=4294967295,t=2,p=1"),
		"memory past u32":    with(3, "m=4294967296,t=2,p=1"),
		"memory below 8":     with(3, "m=7,t=2,p=1"),
		"negative memory":    with(3, "m=-1,t=2,p=1"),
		"t=0":                with(3, "m=19456,t=0,p=1"),
		"t=65":               with(3, "m=19456,t=65,p=1"),
		"p=0":                with(3, "m=19456,t=2,p=0"),
		"p=65":               with(3, "m=19456,t=2,p=65"),
		"p=256":              with(3, "m=19456,t=2,p=256"),
		"no parameters":      with(3, ""),
		"parameters swapped": with(3, "t=2,m=19456,p=1"),
		"bad base64 salt":    with(4, "!!!!!!!!!!!!!!!!!!!!!!"),
		"bad base64 key":     with(5, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"),
		"padded salt":        with(4, salt+"=="),
		"short salt":         with(4, b64.EncodeToString(make([]byte, 7))),
		"long salt":          with(4, b64.EncodeToString(make([]byte, 65))),
		"short key":          with(5, b64.EncodeToString(make([]byte, 15))),
		"long key":           with(5, b64.EncodeToString(make([]byte, 65))),
		"empty salt":         with(4, ""),
		"empty key":          with(5, ""),
		"missing key":        strings.Join(parts[:5], "$"),
		"extra field":        good + "$x",
		"leading text":       "x" + good,
	} {
		_, err := parsePHC(s)
		require.Error(t, err, "%s: %q", name, s)
		require.False(t, verifyPassword(s, "secret"), name)
	}
	// The bounds themselves are accepted (parsed only: verifying 1 GiB is
	// what the bounds are for).
	for _, s := range []string{
		with(3, "m=1048576,t=64,p=64"),
		with(3, "m=8,t=1,p=1"),
		with(4, b64.EncodeToString(make([]byte, 8))),
		with(4, b64.EncodeToString(make([]byte, 64))),
		with(5, b64.EncodeToString(make([]byte, 16))),
		with(5, b64.EncodeToString(make([]byte, 64))),
	} {
		_, err := parsePHC(s)
		require.NoError(t, err, s)
	}
}

func TestVerifiedPasswordsCache(t *testing.T) {
	t.Parallel()
	v := newVerifiedPasswords()
	h, err := hashPassword("secret")
	require.NoError(t, err)

	require.False(t, v.check(1, h, "wrong"))
	require.Empty(t, v.m, "a failed check is not remembered")
	require.True(t, v.check(1, h, "secret"))
	require.Equal(t, verifiedEntry{hash: h, mac: v.mac("secret")}, v.m[1])

	// The entry answers without argon2id: put one against a stored value
	// no hash could verify, so only the cache can say yes.
	v.m[2] = verifiedEntry{hash: "not a hash", mac: v.mac("cached")}
	require.True(t, v.check(2, "not a hash", "cached"), "answered from the cache")
	require.False(t, v.check(2, "not a hash", "other"), "another password misses the cache and fails")
	require.True(t, v.check(2, "not a hash", "cached"), "a failed check keeps the entry")
	require.False(t, v.check(3, "not a hash", "cached"), "entries are per user")

	v.forget(2)
	require.NotContains(t, v.m, uint32(2))
	require.False(t, v.check(2, "not a hash", "cached"), "forgotten: argon2id decides again")
	v.forget(99) // unknown: no-op

	// A changed stored hash is not matched from the cache, even with the
	// password that verified before.
	changed, err := hashPassword("new-secret")
	require.NoError(t, err)
	require.False(t, v.check(1, changed, "secret"))
	require.True(t, v.check(1, changed, "new-secret"))
	require.Equal(t, changed, v.m[1].hash)
	require.False(t, v.check(1, h, "new-secret"), "the old hash with the new password")

	// The MAC key is per process (here: per cache).
	require.NotEqual(t, v.mac("secret"), newVerifiedPasswords().mac("secret"))
	require.NotEqual(t, v.mac("secret"), v.mac("secret2"))
}

func FuzzParsePHC(f *testing.F) {
	good, err := hashPassword("secret")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA")
	f.Add("$argon2id$v=19$m=1048577,t=2,p=1$$")
	f.Add("$$$$$")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parsePHC(s)
		if err != nil {
			return
		}
		if h.memory < 8 || h.memory > maxArgonMemoryKiB || h.time < 1 || h.time > maxArgonTime ||
			h.threads < 1 || h.threads > maxArgonThreads || len(h.salt) < 8 || len(h.salt) > 64 ||
			len(h.key) < 16 || len(h.key) > 64 {
			t.Fatalf("parsePHC(%q) accepted out-of-range parameters: %+v", s, h)
		}
	})
}

// The root password the broker has just set or verified at start is
// remembered: the first login with it does not run argon2id again.
func TestRootPasswordRememberedAtStart(t *testing.T) {
	v := newVerifiedPasswords()
	hash, err := hashPassword("secret")
	require.NoError(t, err)
	v.remember(1, hash, "secret")
	e, ok := v.m[1]
	require.True(t, ok)
	require.Equal(t, hash, e.hash)
	require.True(t, v.check(1, hash, "secret"))
	require.False(t, v.check(1, hash, "wrong"), "another password still goes through argon2id and fails")
}
