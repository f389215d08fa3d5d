package broker

import "testing"

// BenchmarkArgon2id is the cost of one password check that misses the
// verified-passwords cache: a first login, a failed one, a user created.
func BenchmarkArgon2id(b *testing.B) {
	stored, err := hashPassword("secret-password")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if verifyPassword(stored, "wrong-password") {
			b.Fatal("a wrong password verified")
		}
	}
}
