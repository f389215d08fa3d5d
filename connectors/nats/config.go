package nats

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/nats-io/nats.go"
)

const (
	modeJetStream = "jetstream"
	modeCore      = "core"
)

// connFields are the connection keys both connectors share, named as
// the nats CLI and Redpanda Connect's nats inputs and outputs name them.
func connFields() []connector.Field {
	return []connector.Field{
		connector.NewStringField("url").AsSecret().WithDefault("nats://127.0.0.1:4222").WithCheck(checkURL).
			WithDoc("the server, nats:// or tls:// (a comma-separated list for a cluster), with credentials if any (a secret)"),
		connector.NewStringField("username").WithDefault("").WithDoc("user name, with password"),
		connector.NewStringField("password").AsSecret().WithDefault("").WithDoc("password (a secret)"),
		connector.NewStringField("token").AsSecret().WithDefault("").WithDoc("an authentication token (a secret)"),
		connector.NewStringField("credentials_file").WithDefault("").WithDoc("a .creds file (user JWT and NKey seed)"),
		connector.NewStringField("name").WithDefault("ferry").WithDoc("the connection name the server shows"),
		connector.NewEnumField("mode", modeJetStream, modeCore).WithDefault(modeJetStream).
			WithDoc("jetstream: persisted and acknowledged; core: plain subjects, at-most-once (core NATS may lose messages)"),
		connector.NewDurationField("timeout").WithDefault(30 * time.Second).
			WithDoc("connect, publish-acknowledgement and request timeout"),
	}
}

func checkURL(v any) error {
	s, _ := v.(string)
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" {
			return fmt.Errorf("expected nats://host:port URLs, comma-separated")
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("scheme %q: expected nats://, tls://, ws:// or wss://", u.Scheme)
		}
	}
	return nil
}

// safeURL is raw without credentials, for logs and errors.
func safeURL(raw string) string {
	var parts []string
	for _, part := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil {
			parts = append(parts, "(unparsable URL)")
			continue
		}
		u.User = nil
		parts = append(parts, u.Redacted())
	}
	return strings.Join(parts, ",")
}

// connection is how to reach the server.
type connection struct {
	url, safeURL string
	options      []nats.Option
	timeout      time.Duration
	mode         string
}

func newConnection(set *connector.Settings, onEvent func(msg string, err error)) connection {
	c := connection{url: set.String("url"), timeout: set.Duration("timeout"), mode: set.String("mode")}
	c.safeURL = safeURL(c.url)
	c.options = []nats.Option{
		nats.Name(set.String("name")), nats.Timeout(c.timeout),
		// Reconnect for ever: a publish waiting for its acknowledgement
		// rides out a restart; Consume's own deadline bounds the wait.
		nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { onEvent("disconnected", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { onEvent("reconnected", nil) }),
	}
	if u := set.String("username"); u != "" {
		c.options = append(c.options, nats.UserInfo(u, set.String("password")))
	}
	if t := set.String("token"); t != "" {
		c.options = append(c.options, nats.Token(t))
	}
	if f := set.String("credentials_file"); f != "" {
		c.options = append(c.options, nats.UserCredentials(f))
	}
	return c
}

func (c connection) dial() (*nats.Conn, error) {
	nc, err := nats.Connect(c.url, c.options...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.safeURL, err)
	}
	return nc, nil
}

// checkSubject reports why s cannot be published to: empty, empty
// tokens, wildcards, whitespace or control characters.
func checkSubject(s string) error {
	if s == "" {
		return fmt.Errorf("the subject is empty")
	}
	if len(s) > 4096 {
		return fmt.Errorf("the subject is %d bytes long", len(s))
	}
	for _, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q has an empty token", s)
		case tok == "*" || tok == ">" || strings.ContainsAny(tok, "*>"):
			return fmt.Errorf("subject %q has a wildcard", s)
		}
		for _, r := range tok {
			if r <= ' ' || r == 0x7f {
				return fmt.Errorf("subject %q has whitespace or a control character", s)
			}
		}
	}
	return nil
}

// checkFilter is checkSubject for a subscription: * and > are allowed
// as whole tokens, > only last.
func checkFilter(s string) error {
	toks := strings.Split(s, ".")
	plain := make([]string, len(toks))
	for i, tok := range toks {
		plain[i] = tok
		if tok == "*" || (tok == ">" && i == len(toks)-1) {
			plain[i] = "x"
		}
	}
	if err := checkSubject(strings.Join(plain, ".")); err != nil {
		return fmt.Errorf("%q: only * and a last > are wildcards, and tokens are not empty nor hold whitespace", s)
	}
	return nil
}
