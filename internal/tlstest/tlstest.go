// Package tlstest makes throwaway TLS certificates for tests: one
// self-signed certificate (its own CA) for localhost and 127.0.0.1, valid
// for an hour either side of now, as PEM, as files in the test's temporary
// directory, as a pool that trusts it and as a tls.Certificate to serve.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a self-signed server certificate and its key.
type Cert struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string // the PEM blocks, written in t.TempDir()
	Pool              *x509.CertPool
	TLS               tls.Certificate
}

// SelfSigned makes a Cert for localhost and 127.0.0.1; it fails the test
// on any error.
func SelfSigned(t testing.TB) Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse: %v", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	c := Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Pool:    x509.NewCertPool(),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
	}
	c.Pool.AddCert(leaf)
	dir := t.TempDir()
	c.CertFile, c.KeyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, data := range map[string][]byte{c.CertFile: c.CertPEM, c.KeyFile: c.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("tlstest: %v", err)
		}
	}
	return c
}
