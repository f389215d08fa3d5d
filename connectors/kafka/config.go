package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The keys both connectors share: where the cluster is and how to log in.
func clientFields() []connector.Field {
	return []connector.Field{
		connector.NewStringListField("brokers").Require().WithExample([]string{"localhost:9092"}).WithCheck(checkBrokers).
			WithDoc("the seed brokers, host:port (Kafka's bootstrap.servers)"),
		connector.NewStringField("client_id").WithDefault("ferry").WithDoc("the client id the brokers see (Kafka's client.id)"),
		connector.NewEnumField("sasl_mechanism", "none", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512").WithDefault("none").
			WithDoc("SASL authentication (Kafka's sasl.mechanism); none = no SASL"),
		connector.NewStringField("sasl_username").WithDefault("").WithDoc("the SASL user"),
		connector.NewStringField("sasl_password").AsSecret().WithDefault("").WithDoc("the SASL password (a secret)"),
		connector.NewBoolField("tls").WithDefault(false).WithDoc("connect with TLS (security.protocol SSL or SASL_SSL)"),
		connector.NewStringField("tls_ca_file").WithDefault("").WithDoc("PEM CA bundle to verify the brokers; empty = the system's"),
		connector.NewStringField("tls_cert_file").WithDefault("").WithDoc("PEM client certificate, for mutual TLS (with tls_key_file)"),
		connector.NewStringField("tls_key_file").WithDefault("").WithDoc("PEM client key, for mutual TLS"),
		connector.NewBoolField("tls_skip_verify").WithDefault(false).WithDoc("do not verify the brokers' certificates (testing only)"),
		connector.NewDurationField("timeout").WithDefault(30 * time.Second).
			WithDoc("dial and request timeout; the sink's per-batch delivery timeout; the source's commit timeout"),
	}
}

func lintClient(s *connector.Settings, fail connector.FailFunc) {
	if s.String("sasl_mechanism") != "none" && s.String("sasl_username") == "" {
		fail("sasl_username", "sasl_mechanism %s needs a user", s.String("sasl_mechanism"))
	}
	if (s.String("tls_cert_file") == "") != (s.String("tls_key_file") == "") {
		fail("tls_cert_file", "tls_cert_file and tls_key_file go together")
	}
	for _, k := range []string{"tls_ca_file", "tls_cert_file", "tls_key_file"} {
		if s.String(k) != "" && !s.Bool("tls") {
			fail(k, "set, but tls = false")
		}
	}
	if s.Duration("timeout") <= 0 {
		fail("timeout", "must be above zero")
	}
}

// checkBrokers accepts a non-empty list of host:port.
func checkBrokers(v any) error {
	list := stringsOf(v)
	if len(list) == 0 {
		return fmt.Errorf("expected at least one broker")
	}
	for _, b := range list {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return fmt.Errorf("%q: expected host:port", b)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: the port must be 1..65535", b)
		}
	}
	return nil
}

// clientOpts are the kgo options of the shared keys. Files named are
// checked against the connector's Paths.
func clientOpts(set *connector.Settings, paths connector.Paths) ([]kgo.Opt, error) {
	timeout := set.Duration("timeout")
	opts := []kgo.Opt{
		kgo.SeedBrokers(set.Strings("brokers")...),
		kgo.ClientID(set.String("client_id")),
		kgo.DialTimeout(timeout),
		kgo.RetryTimeout(timeout),
	}
	user, pass := set.String("sasl_username"), set.String("sasl_password")
	switch strings.ToUpper(set.String("sasl_mechanism")) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	if set.Bool("tls") {
		tc, err := tlsConfig(set, paths)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

func tlsConfig(set *connector.Settings, paths connector.Paths) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: set.Bool("tls_skip_verify")} //nolint:gosec // the user's choice, documented as testing only
	read := func(key string) ([]byte, error) {
		path := set.String(key)
		if err := paths.Check(path); err != nil {
			return nil, set.Errorf(key, "%v", err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, set.Errorf(key, "read: %v", err)
		}
		return data, nil
	}
	if set.String("tls_ca_file") != "" {
		pem, err := read("tls_ca_file")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, set.Errorf("tls_ca_file", "no PEM certificate in %s", set.String("tls_ca_file"))
		}
		tc.RootCAs = pool
	}
	if set.String("tls_cert_file") != "" {
		cert, err := read("tls_cert_file")
		if err != nil {
			return nil, err
		}
		key, err := read("tls_key_file")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, set.Errorf("tls_cert_file", "the certificate and key do not load: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// validTopic reports why name is not a legal Kafka topic name ("" when
// it is): 1..249 characters of [a-zA-Z0-9._-], not "." or "..".
func validTopic(name string) string {
	switch {
	case name == "":
		return "a topic name cannot be empty"
	case name == "." || name == "..":
		return fmt.Sprintf("%q is not a legal topic name", name)
	case len(name) > 249:
		return fmt.Sprintf("a topic name has at most 249 characters, this one %d", len(name))
	}
	for _, r := range name {
		if !topicRune(r) {
			return fmt.Sprintf("%q: a topic name holds only ASCII letters, digits, '.', '_' and '-'", name)
		}
	}
	return ""
}

func topicRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// sanitizeTopicPart makes an Iggy stream or topic name fit a Kafka topic
// name: every other character becomes '_'.
func sanitizeTopicPart(s string) string {
	return strings.Map(func(r rune) rune {
		if topicRune(r) {
			return r
		}
		return '_'
	}, s)
}

// stringsOf is a parsed string list ([]any of strings, or []string).
func stringsOf(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}
