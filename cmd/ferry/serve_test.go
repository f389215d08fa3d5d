package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// testPKI is a CA and a server certificate for localhost and 127.0.0.1
// that it signed, written as PEM files.
type testPKI struct{ caFile, certFile, keyFile string }

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	p := testPKI{filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")}
	for file, block := range map[string]*pem.Block{
		p.caFile: {Type: "CERTIFICATE", Bytes: caDER}, p.certFile: {Type: "CERTIFICATE", Bytes: der},
		p.keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(block), 0o600))
	}
	return p
}

// served is a `ferry serve` running in-process through the command tree.
type served struct {
	addr, metrics string
	lines         *bufio.Scanner
}

// serve runs `ferry serve args...` in-process until the test ends and
// returns once it has printed where it listens.
func serve(t *testing.T, args ...string) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := newRootCmd()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"serve", "--data-dir", ""}, args...))
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		pw.CloseWithError(errors.Join(err, io.EOF))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr) // the command may still print
		require.NoError(t, <-done)
	})
	s := served{lines: bufio.NewScanner(pr)}
	require.True(t, s.lines.Scan(), "serve printed nothing: %v", s.lines.Err())
	first := s.lines.Text()
	addr, ok := strings.CutPrefix(first, "ferry broker listening on ")
	require.True(t, ok, first)
	s.addr, _, _ = strings.Cut(addr, " ")
	return s
}

// metricsLine reads the metrics address serve prints after its address.
func (s *served) metricsLine(t *testing.T) {
	t.Helper()
	require.True(t, s.lines.Scan(), "no metrics line: %v", s.lines.Err())
	u, ok := strings.CutPrefix(s.lines.Text(), "metrics at http://")
	require.True(t, ok, s.lines.Text())
	s.metrics = strings.TrimSuffix(u, "/metrics")
}

// sample returns the value of the series named exactly series (name and
// labels as exposed), or -1 if it is not there.
func sample(t *testing.T, metricsAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return -1
}

// TestServeTLSWithCAFile: a client that trusts only the test CA sends and
// polls over `ferry serve --tls-cert --tls-key`; cluster metadata reports
// the port served, and /metrics counts the send and the poll.
func TestServeTLSWithCAFile(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	s := serve(t, "--addr", "127.0.0.1:0", "--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--metrics-addr", "127.0.0.1:0")
	s.metricsLine(t)
	ctx := context.Background()

	_, err := iggy.Dial(ctx, s.addr, iggy.WithCredentials("iggy", "iggy"), iggy.WithTLS("", "localhost"), iggy.WithoutReconnect())
	require.Error(t, err, "the system roots do not know the test CA")
	_, err = iggy.Dial(ctx, s.addr, iggy.WithCredentials("iggy", "iggy"), iggy.WithoutReconnect(), iggy.WithDialTimeout(5*time.Second))
	require.Error(t, err, "plain TCP to a TLS listener")

	c, err := iggy.Dial(ctx, s.addr, iggy.WithCredentials("iggy", "iggy"), iggy.WithTLS(pki.caFile, "localhost"))
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, -1.0, sample(t, s.metrics, `iggy_broker_messages_in_total{stream="s",topic="t"}`), "no series before the topic exists")
	st, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	tp, err := c.CreateTopic(ctx, iggy.NumericID(st.ID), "t", 1)
	require.NoError(t, err)
	sid, tid := iggy.NumericID(st.ID), iggy.NumericID(tp.ID)

	md, err := c.ClusterMetadata(ctx)
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(s.addr)
	require.NoError(t, err)
	require.Len(t, md.Nodes, 1)
	require.Equal(t, port, strconv.Itoa(int(md.Nodes[0].TCP)), "advertised TCP port")
	require.Zero(t, md.Nodes[0].QUIC+md.Nodes[0].HTTP+md.Nodes[0].WS, "transports not served are disabled (0)")

	in := `iggy_broker_messages_in_total{stream="s",topic="t"}`
	out := `iggy_broker_messages_out_total{stream="s",topic="t"}`
	require.Equal(t, 0.0, sample(t, s.metrics, in))
	require.Equal(t, 1.0, sample(t, s.metrics, `iggy_broker_connections{state="logged_in"}`))

	msgs := []iggy.Message{}
	for _, p := range []string{"a", "b", "c"} {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = c.SendMessages(ctx, sid, tid, iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	require.Equal(t, 3.0, sample(t, s.metrics, in))
	require.Equal(t, 0.0, sample(t, s.metrics, out))
	require.Equal(t, 3.0, sample(t, s.metrics, `iggy_broker_partition_messages{partition="0",stream="s",topic="t"}`))
	require.Greater(t, sample(t, s.metrics, `iggy_broker_partition_size_bytes{partition="0",stream="s",topic="t"}`), 0.0)

	got, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(0)), Stream: sid, Topic: tid,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
	})
	require.NoError(t, err)
	require.Len(t, got.Messages, 3)
	require.Equal(t, "c", string(got.Messages[2].Payload))
	require.Equal(t, 3.0, sample(t, s.metrics, out))
	require.Greater(t, sample(t, s.metrics, `iggy_broker_bytes_out_total{stream="s",topic="t"}`), 0.0)

	// Ferry's own commands, as the README shows them.
	polled, err := ferry(t, "", "message", "poll", "s", "t", "0", "--first", "--count", "3",
		"--address="+s.addr, "--tls-ca-file="+pki.caFile, "--tls-domain=localhost")
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(polled), "\n"), 3, polled)
	require.Equal(t, 6.0, sample(t, s.metrics, out))
}

// TestServeFromUpstreamEnvironment: IGGY_TCP_ADDRESS and the
// IGGY_TCP_TLS_* names configure the listener when no flag is given.
func TestServeFromUpstreamEnvironment(t *testing.T) {
	pki := newTestPKI(t)
	t.Setenv(envTCPAddress, "127.0.0.1:0")
	t.Setenv(envTCPTLSEnabled, "true")
	t.Setenv(envTCPTLSCertFile, pki.certFile)
	t.Setenv(envTCPTLSKeyFile, pki.keyFile)
	s := serve(t)
	require.NotEqual(t, "127.0.0.1:8090", s.addr, "the address came from the environment")
	c, err := iggy.Dial(context.Background(), s.addr, iggy.WithCredentials("iggy", "iggy"), iggy.WithTLS(pki.caFile, "localhost"))
	require.NoError(t, err)
	require.NoError(t, c.Ping(context.Background()))
	require.NoError(t, c.Close())
}

// TestResolveListener: how flags and upstream's environment names combine.
func TestResolveListener(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		args      []string
		env       map[string]string
		want      serveListener
		err, warn string
	}{
		{want: serveListener{addr: "127.0.0.1:8090"}},
		{env: map[string]string{envTCPAddress: "0.0.0.0:9000"}, want: serveListener{addr: "0.0.0.0:9000"}},
		{args: []string{"--addr", "127.0.0.1:1"}, env: map[string]string{envTCPAddress: "0.0.0.0:9000"},
			want: serveListener{addr: "127.0.0.1:1"}},
		{env: map[string]string{envTCPTLSEnabled: "true", envTCPTLSCertFile: "c.pem", envTCPTLSKeyFile: "k.pem"},
			want: serveListener{addr: "127.0.0.1:8090", tlsCert: "c.pem", tlsKey: "k.pem", tls: true}},
		{args: []string{"--tls-cert", "f.pem"}, env: map[string]string{envTCPTLSEnabled: "1", envTCPTLSCertFile: "c.pem", envTCPTLSKeyFile: "k.pem"},
			want: serveListener{addr: "127.0.0.1:8090", tlsCert: "f.pem", tlsKey: "k.pem", tls: true, tlsFromFlags: true}},
		{args: []string{"--tls-cert", "f.pem", "--tls-key", "g.pem"}, env: map[string]string{envTCPTLSEnabled: "false"},
			want: serveListener{addr: "127.0.0.1:8090", tlsCert: "f.pem", tlsKey: "g.pem", tls: true, tlsFromFlags: true}},
		{env: map[string]string{envTCPTLSCertFile: "c.pem", envTCPTLSKeyFile: "k.pem"},
			want: serveListener{addr: "127.0.0.1:8090"}, warn: envTCPTLSEnabled + " is not true"},
		{env: map[string]string{envTCPTLSEnabled: "true"}, err: "TLS needs a certificate and a key"},
		{args: []string{"--tls-cert", "f.pem"}, err: "TLS needs a certificate and a key"},
		{env: map[string]string{envTCPTLSEnabled: "yes please"}, err: envTCPTLSEnabled},
	} {
		var addr, cert, key string
		cmd := &cobra.Command{}
		cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8090", "")
		cmd.Flags().StringVar(&cert, "tls-cert", "", "")
		cmd.Flags().StringVar(&key, "tls-key", "", "")
		require.NoError(t, cmd.Flags().Parse(tc.args), "case %d", i)
		got, err := resolveListener(cmd.Flags(), addr, cert, key, func(k string) string { return tc.env[k] })
		if tc.err != "" {
			var ue usageError
			require.ErrorAs(t, err, &ue, "case %d", i)
			require.ErrorContains(t, err, tc.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		if tc.warn != "" {
			require.Len(t, got.warnings, 1, "case %d", i)
			require.Contains(t, got.warnings[0], tc.warn, "case %d", i)
		}
		got.warnings = nil
		require.Equal(t, tc.want, got, "case %d", i)
	}
}

// Deduplication from the flags, else from upstream's environment names.
func TestResolveDedup(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		args []string
		env  map[string]string
		want broker.Dedup
		err  string
	}{
		{want: broker.Dedup{}},
		{env: map[string]string{envDedupEnabled: "true"}, want: broker.Dedup{MaxEntries: defaultDedupEntries}},
		{env: map[string]string{envDedupEnabled: "true", envDedupMaxEntries: "50", envDedupExpiry: "1m"},
			want: broker.Dedup{MaxEntries: 50, Expiry: time.Minute}},
		{env: map[string]string{envDedupEnabled: "false", envDedupMaxEntries: "50"}, want: broker.Dedup{}},
		{args: []string{"--dedup-max-entries", "7", "--dedup-expiry", "2s"}, env: map[string]string{envDedupEnabled: "true", envDedupExpiry: "1m"},
			want: broker.Dedup{MaxEntries: 7, Expiry: 2 * time.Second}},
		{env: map[string]string{envDedupEnabled: "yes"}, err: envDedupEnabled},
		{env: map[string]string{envDedupEnabled: "true", envDedupMaxEntries: "-3"}, err: envDedupMaxEntries},
		{env: map[string]string{envDedupExpiry: "soon"}, err: envDedupExpiry},
	} {
		var entries int
		var expiry time.Duration
		cmd := &cobra.Command{}
		cmd.Flags().IntVar(&entries, "dedup-max-entries", 0, "")
		cmd.Flags().DurationVar(&expiry, "dedup-expiry", 0, "")
		require.NoError(t, cmd.Flags().Parse(tc.args), "case %d", i)
		got, err := resolveDedup(cmd.Flags(), entries, expiry, func(k string) string { return tc.env[k] })
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, got, "case %d", i)
	}
}
