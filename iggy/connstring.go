package iggy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/units"
)

// DefaultPort is the Iggy server's TCP port, used when a target names
// none.
const DefaultPort = "8090"

// ErrInvalidConnectionString is wrapped by every error about a target
// passed to Dial. Such errors never repeat the credentials.
var ErrInvalidConnectionString = errors.New("iggy: invalid connection string")

// connStringKeys are the query parameters a connection string may carry.
var connStringKeys = []string{
	"tls", "tls_domain", "tls_ca_file", "pat", "heartbeat_interval",
	"reconnection_interval", "reconnection_max_interval", "reconnection_retries",
	"request_timeout",
}

// parseTarget reads a Dial target into c. A target is either "host:port"
// or a connection string:
//
//	iggy://user:password@host:port?option=value&...
//	iggy+tcp://...   the same
//	iggy+tls://...   TLS on (as ?tls=true)
//	iggy://TOKEN@host:port, iggy://:TOKEN@host:port or ?pat=TOKEN
//	                 log in with a personal access token
//
// The port defaults to 8090. User, password and token are percent-decoded.
// Characters that end the parts of a URL ('@', '/', '?', '#') should be
// percent-encoded in them; unencoded ones are tolerated: the credentials
// end at the last '@' before the options, and the options start at the
// first '?' followed by a known option name and '='.
// Options: tls (true|false), tls_domain, tls_ca_file, pat,
// heartbeat_interval, reconnection_interval (the minimum backoff),
// reconnection_max_interval, reconnection_retries (a count or
// "unlimited"), request_timeout; durations are humantime ("5s", "1m 30s").
// Unknown options are an error. Errors never repeat text that may be part
// of the credentials: nothing before the last '@' of the target.
func parseTarget(target string, c *config) error {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok {
		addr, err := hostPort(target, !strings.Contains(target, "@"))
		if err != nil {
			return err
		}
		c.addr = addr
		return nil
	}
	switch scheme {
	case "iggy", "iggy+tcp":
	case "iggy+tls":
		c.tlsEnabled = true
	default:
		if strings.HasPrefix(scheme, "iggy+") {
			return fmt.Errorf("%w: transport %q is not supported; Ferry speaks TCP (iggy:// or iggy+tls://)", ErrInvalidConnectionString, strings.TrimPrefix(scheme, "iggy+"))
		}
		return fmt.Errorf("%w: scheme must be iggy://, iggy+tcp:// or iggy+tls://", ErrInvalidConnectionString)
	}
	// Everything up to the last '@' may be a secret, in errors too.
	lastAt := strings.LastIndexByte(rest, '@')
	at := strings.LastIndexByte(rest[:optionsStart(rest)], '@')
	if at >= 0 {
		if err := parseUserinfo(rest[:at], c); err != nil {
			return err
		}
	}
	host, query, hasQuery := strings.Cut(rest[at+1:], "?")
	addr, err := hostPort(host, at == lastAt)
	if err != nil {
		return err
	}
	c.addr = addr
	if !hasQuery || query == "" {
		return nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("%w: the options after '?' are not valid URL query syntax", ErrInvalidConnectionString)
	}
	show := at+1+len(host) > lastAt // the options are past every '@'
	for key, vs := range values {
		if err := applyConnOption(key, vs[len(vs)-1], c, show); err != nil {
			return err
		}
	}
	return nil
}

// optionsStart returns the index in rest of the '?' that starts the
// options: the first one followed by a known option name and '=', or
// len(rest). A '?' in a password is not followed by one.
func optionsStart(rest string) int {
	for i := 0; i < len(rest); i++ {
		if rest[i] != '?' {
			continue
		}
		for _, k := range connStringKeys {
			if strings.HasPrefix(rest[i+1:], k+"=") {
				return i
			}
		}
	}
	return len(rest)
}

// parseUserinfo reads "user:password" or a token. Its errors never quote
// the text, which is or contains a secret.
func parseUserinfo(info string, c *config) error {
	user, pass, hasPass := strings.Cut(info, ":")
	u, err1 := url.PathUnescape(user)
	p, err2 := url.PathUnescape(pass)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: the credentials before '@' have an invalid %%-escape", ErrInvalidConnectionString)
	}
	switch {
	case !hasPass && u == "":
		return fmt.Errorf("%w: nothing before '@'; give user:password or a token", ErrInvalidConnectionString)
	case !hasPass:
		c.token, c.username, c.password = u, "", ""
	case u == "" && p == "":
		return fmt.Errorf("%w: empty user and password before '@'", ErrInvalidConnectionString)
	case u == "":
		c.token, c.username, c.password = p, "", ""
	case p == "":
		return fmt.Errorf("%w: the user before '@' has an empty password", ErrInvalidConnectionString)
	default:
		c.username, c.password, c.token = u, p, ""
	}
	return nil
}

// hostPort checks a server address and adds the default port. show says
// whether errors may quote s (false when s may hold part of a secret).
func hostPort(s string, show bool) (string, error) {
	quote := func(s string) string {
		if show {
			return " " + strconv.Quote(s)
		}
		return ""
	}
	if s == "" {
		return "", fmt.Errorf("%w: no server address", ErrInvalidConnectionString)
	}
	if strings.ContainsAny(s, "/@?# \t\r\n") {
		return "", fmt.Errorf("%w: server address%s has characters a host:port cannot", ErrInvalidConnectionString, quote(s))
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host name, or a bracketed or bare IPv6 address.
		bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if strings.ContainsAny(bare, "[]") || (strings.Contains(bare, ":") && net.ParseIP(bare) == nil) {
			return "", fmt.Errorf("%w: server address%s is not host:port", ErrInvalidConnectionString, quote(s))
		}
		host, port = bare, DefaultPort
	}
	if host == "" {
		return "", fmt.Errorf("%w: server address%s has no host", ErrInvalidConnectionString, quote(s))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("%w: port%s is not a number in 1..65535", ErrInvalidConnectionString, quote(port))
	}
	return net.JoinHostPort(host, port), nil
}

// applyConnOption applies one option; show says whether errors may quote
// the key and value.
func applyConnOption(key, v string, c *config, show bool) error {
	badValue := func(what string) error {
		if !show {
			return fmt.Errorf("%w: option %s has a bad value", ErrInvalidConnectionString, key) // a known name
		}
		return fmt.Errorf("%w: option %s=%q: %s", ErrInvalidConnectionString, key, v, what)
	}
	switch key {
	case "tls":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badValue("want true or false")
		}
		c.tlsEnabled = b
	case "tls_domain":
		c.tlsDomain = v
	case "tls_ca_file":
		c.tlsCAFile = v
		c.tlsEnabled = true
	case "pat":
		if v == "" {
			return fmt.Errorf("%w: option pat is empty", ErrInvalidConnectionString)
		}
		c.token, c.username, c.password = v, "", ""
	case "heartbeat_interval", "reconnection_interval", "reconnection_max_interval", "request_timeout":
		d, err := parseDuration(v)
		if err != nil {
			return badValue(err.Error())
		}
		switch key {
		case "heartbeat_interval":
			c.heartbeat = d
		case "reconnection_interval":
			c.backoffMin = d
			c.backoffMax = max(c.backoffMax, d)
		case "reconnection_max_interval":
			c.backoffMax = d
		case "request_timeout":
			c.requestTimeout = d
		}
	case "reconnection_retries":
		if v == "unlimited" {
			c.maxReconnects = 0
			break
		}
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return badValue("want a count or \"unlimited\"")
		}
		if n == 0 {
			c.reconnect = false
		}
		c.maxReconnects = int(n)
	default:
		if !show {
			return fmt.Errorf("%w: unknown option (known: %s)", ErrInvalidConnectionString, strings.Join(connStringKeys, ", "))
		}
		return fmt.Errorf("%w: unknown option %q (known: %s)", ErrInvalidConnectionString, key, strings.Join(connStringKeys, ", "))
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	switch s {
	case "0", "off", "none", "disabled":
		return 0, nil
	}
	return units.ParseDuration(s)
}
