package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
)

// maxPacket is MQTT 3.1.1's largest remaining length of a packet
// (268,435,455 bytes): a PUBLISH holds its topic, packet id and payload.
const maxPacket = 268_435_455

var schemes = []string{"tcp", "mqtt", "ssl", "tls", "mqtts"}

// The connection's keys, shared by the sink and the source; names as
// Redpanda Connect's mqtt input and output have them.
func connectionFields() []connector.Field {
	return []connector.Field{
		connector.NewStringListField("urls").Require().WithExample([]any{"tcp://localhost:1883"}).WithCheck(checkURLs).
			WithDoc("the brokers, tcp:// (or mqtt://) and ssl:// (or tls://, mqtts://: TLS, verified with tls_ca_file or the system's CAs); tried in order"),
		connector.NewStringField("client_id").WithDefault("").WithExample("ferry-1").
			WithDoc(`the MQTT client id; "" = "ferry-" and a random suffix (at most 23 bytes for brokers that keep to MQTT 3.1.1's minimum)`),
		connector.NewStringField("user").WithDefault("").WithDoc("the user name; empty: anonymous"),
		connector.NewStringField("password").AsSecret().WithDefault("").WithDoc("the password (a secret: never logged or shown)"),
		connector.NewDurationField("connect_timeout").WithDefault(30 * time.Second).WithDoc("how long connecting (and subscribing) may take"),
		connector.NewIntField("keepalive").Between(1, 65535).WithDefault(30).WithDoc("the keep-alive interval, in seconds"),
		connector.NewStringField("tls_ca_file").WithDefault("").
			WithDoc("Ferry: PEM CA bundle to verify the brokers of ssl:// (tls://, mqtts://) URLs; empty = the system's CAs"),
		connector.NewStringField("tls_cert_file").WithDefault("").
			WithDoc("Ferry: PEM client certificate, for brokers that require one (require_certificate), with tls_key_file"),
		connector.NewStringField("tls_key_file").WithDefault("").WithDoc("Ferry: the PEM key of tls_cert_file"),
		connector.NewBoolField("tls_skip_verify").WithDefault(false).
			WithDoc("Ferry: do not verify the brokers' certificates (testing only: anyone on the path can read and change the traffic)"),
	}
}

// tlsKeys are the TLS keys, which need a TLS URL.
var tlsKeys = []string{"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_skip_verify"}

// tlsSchemes are the schemes paho dials with TLS.
var tlsSchemes = []string{"ssl", "tls", "mqtts"}

// lintConnection checks the connection keys together.
func lintConnection(s *connector.Settings, fail connector.FailFunc) {
	if (s.String("tls_cert_file") == "") != (s.String("tls_key_file") == "") {
		if s.String("tls_cert_file") == "" {
			fail("tls_cert_file", "tls_key_file is set without it: they go together")
		} else {
			fail("tls_key_file", "tls_cert_file is set without it: they go together")
		}
	}
	if !usesTLS(s) {
		for _, k := range tlsKeys {
			if (k == "tls_skip_verify" && s.Bool(k)) || (k != "tls_skip_verify" && s.String(k) != "") {
				fail(k, "set, but no URL is ssl://, tls:// or mqtts://, so no connection uses TLS")
			}
		}
	}
}

// usesTLS reports whether a URL of s is dialled with TLS.
func usesTLS(s *connector.Settings) bool {
	for _, raw := range s.Strings("urls") {
		if u, err := url.Parse(raw); err == nil && contains(tlsSchemes, u.Scheme) {
			return true
		}
	}
	return false
}

// tlsConfig is the TLS configuration of the TLS keys, nil when no URL
// uses TLS. The files are read now, so a missing or bad one is an error
// naming its key when the connector is built; each is checked against
// the connector's Paths first.
func tlsConfig(set *connector.Settings, paths connector.Paths) (*tls.Config, error) {
	if !usesTLS(set) {
		return nil, nil
	}
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
	if path := set.String("tls_ca_file"); path != "" {
		data, err := read("tls_ca_file")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, set.Errorf("tls_ca_file", "no PEM certificate in %s", path)
		}
		tc.RootCAs = pool
	}
	if path := set.String("tls_cert_file"); path != "" {
		cert, err := read("tls_cert_file")
		if err != nil {
			return nil, err
		}
		key, err := read("tls_key_file")
		if err != nil {
			return nil, err
		}
		if !hasPEM(cert, "CERTIFICATE") {
			return nil, set.Errorf("tls_cert_file", "no PEM certificate in %s", path)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, set.Errorf("tls_key_file", "%s is not the key of tls_cert_file %s: %v", set.String("tls_key_file"), path, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// hasPEM reports whether data holds a PEM block of type kind.
func hasPEM(data []byte, kind string) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == kind {
			return true
		}
	}
}

// SinkSpec is the sink's plugin_config (Ferry's: upstream has no MQTT
// connector). Key names follow Redpanda Connect's mqtt output; the TLS
// keys, Ferry's Kafka connector's.
var SinkSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringField("topic").Require().WithExample("iggy/{stream}/{topic}").WithCheck(checkTemplate).
		WithDoc("the topic published to: {stream}, {topic} and {partition} are the Iggy stream, topic and partition of the batch; no + or # wildcards"),
	connector.NewIntField("qos").Between(0, 2).WithDefault(1).
		WithDoc("0: fire and forget (may lose); 1: acknowledged before the offset is committed (may repeat); 2: exactly once per MQTT session"),
	connector.NewBoolField("retained").WithDefault(false).WithDoc("publish with the retain flag: the broker keeps the last message of each topic for new subscribers"),
	connector.NewDurationField("write_timeout").WithDefault(30*time.Second).
		WithDoc("how long a batch's publishes may take to be acknowledged (QoS 1, 2) or written (QoS 0)"),
	connector.NewSizeField("max_message_size").Between(1, maxPacket).WithDefault(int64(maxPacket)).
		WithDoc("Ferry: the broker's limit on a PUBLISH (mosquitto's message_size_limit); a larger message is dead-lettered before it is sent, since an MQTT 3.1.1 broker drops it silently"),
)...).Lint(lintConnection)

// SourceSpec is the source's plugin_config (Ferry's). Key names follow
// Redpanda Connect's mqtt input; clean_session defaults to false here.
var SourceSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringListField("topics").Require().WithExample([]any{"sensors/+/temperature", "alerts/#"}).WithCheck(checkFilters).
		WithDoc("the topic filters subscribed to (+ and # wildcards)"),
	connector.NewIntField("qos").Between(0, 2).WithDefault(1).
		WithDoc("the subscription's QoS: 0 loses what arrives while Ferry is away; 1 and 2 are kept by the broker for the persistent session"),
	connector.NewBoolField("clean_session").WithDefault(false).
		WithDoc("false: a persistent session under client_id, so the broker keeps QoS 1/2 messages across restarts; true: start afresh each time"),
	connector.NewStringMapField("topic_routes").WithExample(map[string]string{"alerts/#": "alerts"}).
		WithDoc("Ferry: an MQTT topic filter (one of topics) → the Iggy topic its messages go to, in each of the connector's streams; unmatched messages go to the stream's topic. When several match, the longest filter wins"),
	connector.NewBoolField("skip_retained").WithDefault(false).
		WithDoc("Ferry: drop (and acknowledge) retained messages the broker sends on subscribing, forwarding only live ones"),
	connector.NewIntField("batch_size").Between(1, 65535).WithDefault(100).WithDoc("Ferry: most messages per batch"),
	connector.NewDurationField("batch_wait").WithDefault(100*time.Millisecond).
		WithDoc("Ferry: after the first message, how long a batch waits for more"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("Ferry: the payloads' format in Iggy"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("Ferry: add mqtt_topic, mqtt_qos, mqtt_retained and mqtt_duplicate headers"),
)...).Lint(lintConnection).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if !s.Bool("clean_session") && s.String("client_id") == "" {
		fail("client_id", "a persistent session (clean_session = false) needs a fixed client_id: with a random one every restart starts a new session and loses what the broker kept")
	}
	filters := map[string]bool{}
	for _, f := range s.Strings("topics") {
		filters[f] = true
	}
	for f, topic := range s.StringMap("topic_routes") {
		if !filters[f] {
			fail("topic_routes."+f, "%q is not one of topics", f)
		}
		if topic == "" || len(topic) > 255 {
			fail("topic_routes."+f, "the Iggy topic name must be 1..255 bytes, not %d", len(topic))
		}
	}
})

func checkURLs(v any) error {
	list, _ := v.([]any)
	if len(list) == 0 {
		return fmt.Errorf("expected at least one broker URL")
	}
	for _, e := range list {
		s, _ := e.(string)
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || !contains(schemes, u.Scheme) {
			return fmt.Errorf("%q: expected a URL such as tcp://host:1883 (schemes %s)", safeURL(s), strings.Join(schemes, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// safeURL is raw without credentials, for logs and errors.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.Redacted()
}

// checkName reports why s cannot be (part of) an MQTT topic name or
// filter: invalid UTF-8, NUL, or the control characters mosquitto refuses
// (it disconnects a client that sends them).
func checkName(s string) error {
	if len(s) > 65535 {
		return fmt.Errorf("%d bytes, above MQTT's 65535", len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == 0:
			return fmt.Errorf("holds a NUL character")
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("holds the control character %U", r)
		case r == 0xfffe || r == 0xffff:
			return fmt.Errorf("holds the non-character %U", r)
		}
	}
	return nil
}

// checkTopic reports why s cannot be a topic published to.
func checkTopic(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case strings.ContainsAny(s, "+#"):
		return fmt.Errorf("%q holds a + or # wildcard, which only subscriptions may use", s)
	case strings.HasPrefix(s, "$"):
		return fmt.Errorf("%q starts with $, which brokers keep for themselves ($SYS)", s)
	}
	if err := checkName(s); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	return nil
}

// checkFilter reports why s cannot be a topic filter.
func checkFilter(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if err := checkName(s); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	levels := strings.Split(s, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("%q: # must be the last level", s)
		case l != "#" && l != "+" && strings.ContainsAny(l, "+#"):
			return fmt.Errorf("%q: a wildcard must fill a whole level", s)
		}
	}
	return nil
}

func checkFilters(v any) error {
	list, _ := v.([]any)
	if len(list) == 0 {
		return fmt.Errorf("expected at least one topic filter")
	}
	for _, e := range list {
		s, _ := e.(string)
		if err := checkFilter(s); err != nil {
			return err
		}
	}
	return nil
}

// template is a topic with {stream}, {topic} and {partition} in it.
type template struct{ parts []string } // literal, placeholder, literal ...

func parseTemplate(s string) (template, error) {
	var t template
	rest := s
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return t, fmt.Errorf("%q: a { without }", s)
		}
		name := rest[i+1 : i+j]
		if name != "stream" && name != "topic" && name != "partition" {
			return t, fmt.Errorf("%q: unknown placeholder {%s} (want {stream}, {topic} or {partition})", s, name)
		}
		t.parts = append(t.parts, rest[:i], name)
		rest = rest[i+j+1:]
	}
	// The literal parts must be fit on their own.
	probe := t.render("s", "t", 0)
	if err := checkTopic(probe); err != nil {
		return t, err
	}
	return t, nil
}

func checkTemplate(v any) error {
	s, _ := v.(string)
	_, err := parseTemplate(s)
	return err
}

func (t template) render(stream, topic string, partition uint32) string {
	var b strings.Builder
	for i, p := range t.parts {
		if i%2 == 0 {
			b.WriteString(p)
			continue
		}
		switch p {
		case "stream":
			b.WriteString(stream)
		case "topic":
			b.WriteString(topic)
		case "partition":
			fmt.Fprint(&b, partition)
		}
	}
	return b.String()
}

// clientOptions are paho's options for the connection keys. Reconnecting
// is left to Ferry (the runtime restarts a connector), so that what was in
// flight on a lost connection is handled in one place.
func clientOptions(set *connector.Settings, role string, tc *tls.Config) *paho.ClientOptions {
	o := paho.NewClientOptions()
	if tc != nil {
		o.SetTLSConfig(tc.Clone())
	}
	for _, u := range set.Strings("urls") {
		o.AddBroker(u)
	}
	id := set.String("client_id")
	if id == "" {
		var r [6]byte
		_, _ = rand.Read(r[:])
		id = "ferry-" + role + "-" + hex.EncodeToString(r[:])
	}
	o.SetClientID(id).SetUsername(set.String("user")).SetPassword(set.String("password"))
	o.SetProtocolVersion(4) // MQTT 3.1.1
	o.SetConnectTimeout(set.Duration("connect_timeout"))
	o.SetKeepAlive(time.Duration(set.Int("keepalive")) * time.Second)
	o.SetAutoReconnect(false).SetConnectRetry(false)
	return o
}

// wait waits for tok or ctx.
func wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connect connects c within the connect timeout and ctx; withTLS says
// whether a URL uses TLS, for the error's hint.
func connect(ctx context.Context, c paho.Client, timeout time.Duration, where string, withTLS bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := wait(ctx, c.Connect()); err != nil {
		c.Disconnect(0)
		hint := ""
		if withTLS {
			hint = tlsHint(err)
		}
		return fmt.Errorf("connect to %s: %w%s", where, err, hint)
	}
	return nil
}

// tlsHint says which key a failure to connect with TLS points to, or "".
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return " (the broker's certificate is not signed by a CA tls_ca_file names, or by one of the system's when it is empty)"
	case errors.As(err, &host):
		return " (the broker's certificate is not for the host of its URL)"
	case errors.As(err, &invalid):
		return " (the broker's certificate is expired or not valid for a server)"
	case strings.Contains(err.Error(), "certificate required"):
		return " (the broker requires a client certificate: tls_cert_file and tls_key_file)"
	case strings.Contains(err.Error(), "bad certificate") || strings.Contains(err.Error(), "unknown certificate authority"):
		return " (the broker refused the client certificate of tls_cert_file)"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF):
		// With TLS 1.3 a broker checks the client's certificate after
		// the client finished its handshake, and closes the connection
		// while the client writes CONNECT.
		return " (a broker that requires a client certificate closes the connection of a client without one it trusts: tls_cert_file and tls_key_file)"
	}
	return ""
}

func where(set *connector.Settings) string {
	var out []string
	for _, u := range set.Strings("urls") {
		out = append(out, safeURL(u))
	}
	return strings.Join(out, ", ")
}
