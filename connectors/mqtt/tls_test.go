package mqtt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// pki is a CA and the certificates it signed, as PEM, with the files
// written to a directory.
type pki struct {
	caPEM                     []byte
	serverPEM, serverKey      []byte
	clientPEM, clientKey      []byte
	dir                       string
	caFile, certFile, keyFile string
	cert                      *x509.Certificate
	key                       *ecdsa.PrivateKey
}

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return pemOf("EC PRIVATE KEY", der)
}

var serial atomic.Int64

// newPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by it.
func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	p.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &p.key.PublicKey, p.key)
	require.NoError(t, err)
	p.cert, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.caPEM = pemOf("CERTIFICATE", der)
	leaf := func(cn string, usage x509.ExtKeyUsage, ips ...net.IP) ([]byte, []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial.Add(1) + 1), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &k.PublicKey, p.key)
		require.NoError(t, err)
		return pemOf("CERTIFICATE", der), keyPEM(t, k)
	}
	p.serverPEM, p.serverKey = leaf("127.0.0.1", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
	p.clientPEM, p.clientKey = leaf("ferry-test-client", x509.ExtKeyUsageClientAuth)
	p.caFile, p.certFile, p.keyFile = p.write(t, "ca.pem", p.caPEM), p.write(t, "client.pem", p.clientPEM), p.write(t, "client.key", p.clientKey)
	return p
}

func (p *pki) write(t *testing.T, name string, data []byte) string {
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func (p *pki) broker(t *testing.T, requireCert bool) *mqtttest.Own {
	return mqtttest.PrivateTLS(t, mqtttest.TLS{CA: p.caPEM, Cert: p.serverPEM, Key: p.serverKey, RequireCertificate: requireCert})
}

// clientTLS is the test clients' TLS configuration (with the client
// certificate).
func (p *pki) clientTLS(t *testing.T) *tls.Config {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(p.caPEM))
	pair, err := tls.X509KeyPair(p.clientPEM, p.clientKey)
	require.NoError(t, err)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// A pipeline over TLS, verified with tls_ca_file: MQTT → source → Iggy
// → sink → MQTT, each connector on an ssl:// URL, and every message
// arrives. The test's own clients use TLS too.
func TestTLSPipelineWithTheCA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker of its own")
	}
	t.Parallel()
	p := newPKI(t, "pipeline")
	srv := p.broker(t, false)
	base := mqtttest.Name(t, "tls")
	clientID := mqtttest.Name(t, "cid")
	tlsKeys := fmt.Sprintf("tls_ca_file = %q\n", p.caFile)

	var mu sync.Mutex
	var got []string
	sub := paho.NewClient(paho.NewClientOptions().AddBroker(srv.URL).SetClientID(mqtttest.Name(t, "sub")).
		SetTLSConfig(p.clientTLS(t)).SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		mu.Lock()
		got = append(got, string(m.Payload()))
		mu.Unlock()
	}))
	waitTok(t, sub.Connect())
	t.Cleanup(func() { sub.Disconnect(100) })
	waitTok(t, sub.Subscribe(base+"/out/#", 1, nil))

	run := connectortest.Start(t, map[string]string{
		"in.toml":  sourceTOML(srv.URL, clientID, []string{base + "/in/#"}, tlsKeys),
		"out.toml": sinkTOML(srv.URL, base+"/out/{topic}", "", tlsKeys),
	})
	logConnectors(t, run.Runtime)
	connectortest.Eventually(t, "both connectors running", func() bool {
		for _, k := range []connector.Kind{connector.KindSource, connector.KindSink} {
			if run.Runtime.Connectors(k)[0].Status != runtime.StatusRunning {
				return false
			}
		}
		return true
	})
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(srv.URL).SetClientID(mqtttest.Name(t, "pub")).SetTLSConfig(p.clientTLS(t)))
	waitTok(t, pub.Connect())
	t.Cleanup(func() { pub.Disconnect(100) })
	var want []string
	for i := range 50 {
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
		waitTok(t, pub.Publish(base+"/in/dev", 1, false, want[i]))
	}
	connectortest.Eventually(t, "every message over TLS", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(want)
	sort.Strings(got)
	require.Equal(t, want, got)
}

func waitTok(t *testing.T, tok paho.Token) {
	t.Helper()
	require.True(t, tok.WaitTimeout(30*time.Second), "%T timed out", tok)
	require.NoError(t, tok.Error())
}

// Without the CA (the system's CAs do not know the test's), or with
// another CA, connecting fails with the verification error and a hint
// naming tls_ca_file; tls_skip_verify connects anyway. A broker that
// requires a client certificate refuses a client without one, with a
// hint naming tls_cert_file, and takes the one tls_cert_file and
// tls_key_file give.
func TestTLSErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers of their own")
	}
	t.Parallel()
	p := newPKI(t, "errors")
	other := newPKI(t, "other")
	srv := p.broker(t, false)
	strict := p.broker(t, true)
	base := mqtttest.Name(t, "tls-err")
	openErr := func(url string, extra map[string]any) error {
		values := map[string]any{"urls": []any{url}, "topic": base + "/{topic}", "connect_timeout": "10s"}
		for k, v := range extra {
			values[k] = v
		}
		s := newSink(t, values)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := s.Open(ctx)
		_ = s.Close(ctx)
		return err
	}
	err := openErr(srv.URL, nil)
	require.Error(t, err, "the system's CAs do not know the test CA")
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	require.ErrorContains(t, err, "tls_ca_file")
	t.Logf("without the CA: %v", err)
	err = openErr(srv.URL, map[string]any{"tls_ca_file": other.caFile})
	require.ErrorContains(t, err, "tls_ca_file", "another CA")
	require.NoError(t, openErr(srv.URL, map[string]any{"tls_ca_file": p.caFile}))
	require.NoError(t, openErr(srv.URL, map[string]any{"tls_skip_verify": true}))

	err = openErr(strict.URL, map[string]any{"tls_ca_file": p.caFile})
	require.Error(t, err, "no client certificate")
	require.ErrorContains(t, err, "tls_cert_file")
	t.Logf("without a client certificate: %v", err)
	err = openErr(strict.URL, map[string]any{"tls_ca_file": p.caFile, "tls_cert_file": other.certFile, "tls_key_file": other.keyFile})
	require.Error(t, err, "a client certificate of another CA")
	require.ErrorContains(t, err, "tls_cert_file")
	t.Logf("with another CA's client certificate: %v", err)
	require.NoError(t, openErr(strict.URL, map[string]any{"tls_ca_file": p.caFile, "tls_cert_file": p.certFile, "tls_key_file": p.keyFile}))

	// The source, with its client certificate, gets what is published.
	values := map[string]any{"urls": []any{strict.URL}, "topics": []any{base + "/in"}, "client_id": mqtttest.Name(t, "cid"),
		"tls_ca_file": p.caFile, "tls_cert_file": p.certFile, "tls_key_file": p.keyFile, "batch_wait": "5ms"}
	src := newSource(t, values)
	openSource(t, src)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(strict.URL).SetClientID(mqtttest.Name(t, "pub")).SetTLSConfig(p.clientTLS(t)))
	waitTok(t, pub.Connect())
	defer pub.Disconnect(100)
	waitTok(t, pub.Publish(base+"/in", 1, false, `{"over":"mutual TLS"}`))
	msgs := pollAll(t, src, 1)
	require.Equal(t, `{"over":"mutual TLS"}`, string(msgs[0].Payload))
}

// Missing, unreadable or bad TLS files, and TLS keys without a TLS URL,
// fail when the connector is built, with the key named.
func TestTLSConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "config")
	other := newPKI(t, "config-other")
	garbage := p.write(t, "garbage.pem", []byte("not a PEM file\x00\xff"))
	missing := filepath.Join(p.dir, "missing.pem")
	ssl := []any{"ssl://127.0.0.1:8883"}
	for _, c := range []struct {
		values map[string]any
		key    string
		says   string
	}{
		{map[string]any{"urls": ssl, "tls_ca_file": missing}, "tls_ca_file", "no such file"},
		{map[string]any{"urls": ssl, "tls_ca_file": garbage}, "tls_ca_file", "no PEM certificate"},
		{map[string]any{"urls": ssl, "tls_ca_file": p.keyFile}, "tls_ca_file", "no PEM certificate"},
		{map[string]any{"urls": ssl, "tls_ca_file": p.dir}, "tls_ca_file", "read"},
		{map[string]any{"urls": ssl, "tls_cert_file": p.certFile}, "tls_key_file", "go together"},
		{map[string]any{"urls": ssl, "tls_key_file": p.keyFile}, "tls_cert_file", "go together"},
		{map[string]any{"urls": ssl, "tls_cert_file": missing, "tls_key_file": p.keyFile}, "tls_cert_file", "no such file"},
		{map[string]any{"urls": ssl, "tls_cert_file": p.certFile, "tls_key_file": missing}, "tls_key_file", "no such file"},
		{map[string]any{"urls": ssl, "tls_cert_file": garbage, "tls_key_file": p.keyFile}, "tls_cert_file", "no PEM certificate"},
		{map[string]any{"urls": ssl, "tls_cert_file": p.keyFile, "tls_key_file": p.keyFile}, "tls_cert_file", "no PEM certificate"},
		{map[string]any{"urls": ssl, "tls_cert_file": p.certFile, "tls_key_file": garbage}, "tls_key_file", "not the key"},
		{map[string]any{"urls": ssl, "tls_cert_file": p.certFile, "tls_key_file": other.keyFile}, "tls_key_file", "not the key"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "tls_ca_file": p.caFile}, "tls_ca_file", "no URL is ssl://"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "tls_skip_verify": true}, "tls_skip_verify", "no URL is ssl://"},
	} {
		sink := map[string]any{"topic": "a"}
		source := map[string]any{"topics": []any{"a/#"}, "client_id": "c"}
		for k, v := range c.values {
			sink[k], source[k] = v, v
		}
		_, err := NewSink(cfg(sink))
		require.Error(t, err, "sink %v", c.values)
		require.ErrorContains(t, err, c.key, "sink %v", c.values)
		require.ErrorContains(t, err, c.says, "sink %v", c.values)
		_, err = NewSource(cfg(source))
		require.Error(t, err, "source %v", c.values)
		require.ErrorContains(t, err, c.key, "source %v", c.values)
		require.ErrorContains(t, err, c.says, "source %v", c.values)
	}
	// A path the connector may not read is refused by its Paths.
	c := cfg(map[string]any{"urls": ssl, "topic": "a", "tls_ca_file": p.caFile})
	c.Paths = connector.Paths{Allowed: []string{t.TempDir()}}
	_, err := NewSink(c)
	require.ErrorContains(t, err, "tls_ca_file")
}
