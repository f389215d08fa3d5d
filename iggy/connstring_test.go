package iggy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	type want struct {
		addr, user, pass, token string
		tls                     bool
		caFile, domain          string
		heartbeat               time.Duration
		min, max                time.Duration
		retries                 int
		reconnect               bool
		timeout                 time.Duration
	}
	def := defaultConfig()
	base := want{heartbeat: def.heartbeat, min: def.backoffMin, max: def.backoffMax, reconnect: true, timeout: def.requestTimeout}
	with := func(f func(*want)) want { w := base; f(&w); return w }
	cases := []struct {
		in   string
		want want
		err  string // substring of the error; "" = success
	}{
		{in: "127.0.0.1:8090", want: with(func(w *want) { w.addr = "127.0.0.1:8090" })},
		{in: "localhost", want: with(func(w *want) { w.addr = "localhost:8090" })},
		{in: "[::1]:9000", want: with(func(w *want) { w.addr = "[::1]:9000" })},
		{in: "::1", want: with(func(w *want) { w.addr = "[::1]:8090" })},
		{in: "iggy://iggy:secret@localhost:8090", want: with(func(w *want) { w.addr, w.user, w.pass = "localhost:8090", "iggy", "secret" })},
		{in: "iggy+tcp://u:p%40ss@h", want: with(func(w *want) { w.addr, w.user, w.pass = "h:8090", "u", "p@ss" })},
		{in: "iggy://u:p@ss@h:1", want: with(func(w *want) { w.addr, w.user, w.pass = "h:1", "u", "p@ss" })},
		{in: "iggy://u:a:b@h:1", want: with(func(w *want) { w.addr, w.user, w.pass = "h:1", "u", "a:b" })},
		{in: "iggy://u:ab?cd@h:1", want: with(func(w *want) { w.addr, w.user, w.pass = "h:1", "u", "ab?cd" })},
		{in: "iggy://u:se#cret@h:1", want: with(func(w *want) { w.addr, w.user, w.pass = "h:1", "u", "se#cret" })},
		{in: "iggy://u:a/b@h:1", want: with(func(w *want) { w.addr, w.user, w.pass = "h:1", "u", "a/b" })},
		{in: "iggy://u:a?b@c/d#e@h:1?tls=true", want: with(func(w *want) { w.addr, w.user, w.pass, w.tls = "h:1", "u", "a?b@c/d#e", true })},
		{in: "iggy://u:p@h:1?tls_ca_file=/a@b/ca.pem", want: with(func(w *want) { w.addr, w.user, w.pass, w.tls, w.caFile = "h:1", "u", "p", true, "/a@b/ca.pem" })},
		{in: "iggy://h:1?pat=to@ken", want: with(func(w *want) { w.addr, w.token = "h:1", "to@ken" })},
		{in: "iggy://iggypat-abc@h:1", want: with(func(w *want) { w.addr, w.token = "h:1", "iggypat-abc" })},
		{in: "iggy://:tok@h:1", want: with(func(w *want) { w.addr, w.token = "h:1", "tok" })},
		{in: "iggy://h:1?pat=tok", want: with(func(w *want) { w.addr, w.token = "h:1", "tok" })},
		{in: "iggy+tls://u:p@h:1", want: with(func(w *want) { w.addr, w.user, w.pass, w.tls = "h:1", "u", "p", true })},
		{in: "iggy://u:p@h:1?tls=true&tls_domain=example.com", want: with(func(w *want) {
			w.addr, w.user, w.pass, w.tls, w.domain = "h:1", "u", "p", true, "example.com"
		})},
		{in: "iggy://h:1?tls_ca_file=/x/ca.pem", want: with(func(w *want) { w.addr, w.tls, w.caFile = "h:1", true, "/x/ca.pem" })},
		{in: "iggy+tls://h:1?tls=false", want: with(func(w *want) { w.addr = "h:1" })},
		{in: "iggy://h:1?heartbeat_interval=10s&reconnection_interval=1s&reconnection_max_interval=1m&reconnection_retries=7&request_timeout=2m 30s",
			want: with(func(w *want) {
				w.addr, w.heartbeat, w.min, w.max, w.retries, w.timeout = "h:1", 10*time.Second, time.Second, time.Minute, 7, 150*time.Second
			})},
		{in: "iggy://h:1?heartbeat_interval=off", want: with(func(w *want) { w.addr, w.heartbeat = "h:1", 0 })},
		{in: "iggy://h:1?reconnection_retries=0", want: with(func(w *want) { w.addr, w.reconnect = "h:1", false })},
		{in: "iggy://h:1?reconnection_retries=unlimited", want: with(func(w *want) { w.addr = "h:1" })},
		{in: "iggy://h:1?reconnection_interval=30s", want: with(func(w *want) { w.addr, w.min, w.max = "h:1", 30*time.Second, 30*time.Second })},

		{in: "", err: "no server address"},
		{in: "iggy://", err: "no server address"},
		{in: "iggy://u:p@", err: "no server address"},
		{in: "http://h:1", err: "scheme must be"},
		{in: "iggy+quic://h:1", err: `transport "quic" is not supported`},
		{in: "iggy://@h:1", err: "nothing before '@'"},
		{in: "iggy://:@h:1", err: "empty user and password"},
		{in: "iggy://u:@h:1", err: "empty password"},
		{in: "iggy://u:p@h:99999", err: "port"},
		{in: "iggy://u:p@h:0", err: "port"},
		{in: "iggy://u:p@h:x", err: "port"},
		{in: "iggy://u:p@:1", err: "no host"},
		{in: "iggy://u:p@h:1/path", err: "characters"},
		{in: "iggy://u:p@h:1?bogus=1", err: `unknown option "bogus"`},
		{in: "iggy://u:p@h:1?tls=maybe", err: "want true or false"},
		{in: "iggy://u:p@h:1?heartbeat_interval=soon", err: "heartbeat_interval"},
		{in: "iggy://u:p@h:1?reconnection_retries=-1", err: "reconnection_retries"},
		{in: "iggy://u:p@h:1?pat=", err: "pat is empty"},
		{in: "iggy://u:p@h:1?%zz", err: "URL query"},
		{in: "iggy://u%zz:p@h:1", err: "%-escape"},
		{in: "a:b:c", err: "not host:port"},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			t.Parallel()
			c := defaultConfig()
			err := parseTarget(tc.in, &c)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrInvalidConnectionString, "case %d %q", i, tc.in)
				require.ErrorContains(t, err, tc.err, "case %d %q", i, tc.in)
				return
			}
			require.NoError(t, err, "case %d %q", i, tc.in)
			got := want{addr: c.addr, user: c.username, pass: c.password, token: c.token, tls: c.tlsEnabled,
				caFile: c.tlsCAFile, domain: c.tlsDomain, heartbeat: c.heartbeat, min: c.backoffMin, max: c.backoffMax,
				retries: c.maxReconnects, reconnect: c.reconnect, timeout: c.requestTimeout}
			require.Equal(t, tc.want, got, "case %d %q", i, tc.in)
		})
	}
}

func TestParseTargetNeverLeaksSecrets(t *testing.T) {
	t.Parallel()
	for i, in := range []string{
		"iggy://user:Sup3rSecret@h:99999",
		"iggy://user:Sup3rSecret@h:1?bogus=1",
		"iggy://user:Sup3rSecret@h:1?%zz",
		"iggy://user:Sup3rSecret@h:1/x",
		"iggy://Sup3rSecret@h:x",
		"iggy://h:1?pat=Sup3rSecret&tls=maybe",
		"iggy://user:Sup3rSecret%zz@h:1",
		"iggy://iggy:ab?Sup3rSecret@127.0.0.1:8090/x",
		"iggy://iggy:12?Sup3rSecret@127.0.0.1:8090?bogus=1",
		"iggy://iggy:12?Sup3rSecret@127.0.0.1:99999",
		"iggy://iggy:se#Sup3rSecret@h:1?bogus=1",
		"iggy://iggy:se/Sup3rSecret@h:x",
		"iggy://iggy:1?tls=Sup3rSecret@h:1",
		"iggy://iggy:Sup3rSecret@h:1?tls_ca_file=/a@b&tls=maybe",
		"iggy:Sup3rSecret@h:1",
	} {
		c := defaultConfig()
		err := parseTarget(in, &c)
		require.Error(t, err, "case %d", i)
		require.NotContains(t, err.Error(), "Sup3rSecret", "case %d", i)
	}
}

func TestOptionsOverrideConnectionString(t *testing.T) {
	t.Parallel()
	c := defaultConfig()
	require.NoError(t, parseTarget("iggy://a:b@h:1?heartbeat_interval=9s", &c))
	for _, o := range []Option{WithToken("tok"), WithHeartbeat(time.Second)} {
		o.apply(&c)
	}
	require.Equal(t, "tok", c.token)
	require.Empty(t, c.username)
	require.Empty(t, c.password)
	require.Equal(t, time.Second, c.heartbeat)
	require.NoError(t, c.validate())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		opts []Option
		err  string
	}{
		{[]Option{WithHeartbeat(-1)}, "heartbeat interval"},
		{[]Option{WithReconnect(0, time.Second)}, "backoff"},
		{[]Option{WithReconnect(2*time.Second, time.Second)}, "backoff"},
		{[]Option{WithRequestTimeout(0)}, "request timeout"},
		{[]Option{WithDialTimeout(-time.Second)}, "dial timeout"},
		{[]Option{WithSDK("", "1")}, "SDK name"},
		{[]Option{WithTLS("/nonexistent/ca.pem", "")}, "reading TLS CA file"},
		{[]Option{WithCredentials("user", "")}, "has no password"},
		{[]Option{WithCredentials("ab", "secret")}, "username is 2 bytes"},
		{[]Option{WithCredentials(strings.Repeat("u", 51), "secret")}, "username is 51 bytes"},
		{[]Option{WithCredentials("user", "pw")}, "password is 2 bytes"},
		{[]Option{WithCredentials("user", strings.Repeat("p", 101))}, "password is 101 bytes"},
		{[]Option{WithToken(strings.Repeat("t", 256))}, "token is 256 bytes"},
	}
	for i, tc := range cases {
		c := defaultConfig()
		c.addr = "127.0.0.1:1"
		for _, o := range tc.opts {
			o.apply(&c)
		}
		err := c.validate()
		require.ErrorIs(t, err, errConfig, "case %d", i)
		require.ErrorContains(t, err, tc.err, "case %d", i)
	}
}

// FuzzParseTarget feeds arbitrary targets to the connection-string parser:
// it must never panic, every error must wrap ErrInvalidConnectionString, a
// success must yield an address; and with a known password or token in
// front of the arbitrary rest, no error may repeat it.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:8090", "localhost", "[::1]:1", "iggy://u:p@h:1", "iggy+tls://u:p@h",
		"iggy://tok@h:1?tls=true&tls_domain=d&tls_ca_file=/c", "iggy://:t@h?pat=x&heartbeat_interval=5s",
		"iggy://u:p@h:1?reconnection_retries=3&reconnection_interval=1s&request_timeout=1m",
		"iggy://u:p%41@h:1", "iggy+quic://h:1", "iggy://@", "iggy://u:p@h:1?%", "h:1/x", "h:99999?tls=maybe",
		"h:1?tls_ca_file=/a@b&tls=maybe", "x@h:99999", "h:1?bogus=a@b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := defaultConfig()
		if err := parseTarget(s, &c); err != nil {
			if !errors.Is(err, ErrInvalidConnectionString) {
				t.Fatalf("error %v does not wrap ErrInvalidConnectionString", err)
			}
		} else {
			c.tlsEnabled, c.tlsCAFile = false, "" // validate must not read files here
			if err := c.validate(); err != nil && !errors.Is(err, errConfig) {
				t.Fatalf("validate: %v", err)
			}
			if c.addr == "" {
				t.Fatal("success without an address")
			}
		}

		// The secret's own text must not come from the rest. Secrets hold
		// the characters that end URL parts, unencoded.
		if strings.Contains(s, "Zq9") || strings.Contains(s, "S3cr3t") {
			return
		}
		for _, secret := range []string{"Zq9-S3cr3t", "Zq9?S3cr3t", "Zq9#S3cr3t", "Zq9/S3cr3t", "Zq9@S3cr3t", "Zq9?tls=S3cr3t", "Zq9:S3cr3t"} {
			for _, target := range []string{"iggy://u:" + secret + "@" + s, "iggy://" + secret + "@" + s, "iggy+tls://:" + secret + "@" + s} {
				c := defaultConfig()
				if err := parseTarget(target, &c); err != nil && (strings.Contains(err.Error(), "S3cr3t") || strings.Contains(err.Error(), "Zq9")) {
					t.Fatalf("error %q repeats the secret of %q", err, target)
				}
			}
		}
	})
}
