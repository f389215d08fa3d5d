package iggy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
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
// Options: tls (true|false), tls_domain, tls_ca_file, pat,
// heartbeat_interval, reconnection_interval (the minimum backoff),
// reconnection_max_interval, reconnection_retries (a count or
// "unlimited"), request_timeout; durations are humantime ("5s", "1m 30s").
// Unknown options are an error.
func parseTarget(target string, c *config) error {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok {
		addr, err := hostPort(target)
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
	rest, query, _ := strings.Cut(rest, "?")
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		if err := parseUserinfo(rest[:i], c); err != nil {
			return err
		}
		rest = rest[i+1:]
	}
	addr, err := hostPort(rest)
	if err != nil {
		return err
	}
	c.addr = addr
	if query == "" {
		return nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("%w: the options after '?' are not valid URL query syntax", ErrInvalidConnectionString)
	}
	for key, vs := range values {
		if err := applyConnOption(key, vs[len(vs)-1], c); err != nil {
			return err
		}
	}
	return nil
}

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
		return fmt.Errorf("%w: user %q has an empty password", ErrInvalidConnectionString, u)
	default:
		c.username, c.password, c.token = u, p, ""
	}
	return nil
}

func hostPort(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: no server address", ErrInvalidConnectionString)
	}
	if strings.ContainsAny(s, "/@?# \t\r\n") {
		return "", fmt.Errorf("%w: server address %q has characters a host:port cannot", ErrInvalidConnectionString, s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host name, or a bracketed or bare IPv6 address.
		bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if strings.ContainsAny(bare, "[]") || (strings.Contains(bare, ":") && net.ParseIP(bare) == nil) {
			return "", fmt.Errorf("%w: server address %q is not host:port", ErrInvalidConnectionString, s)
		}
		host, port = bare, DefaultPort
	}
	if host == "" {
		return "", fmt.Errorf("%w: server address %q has no host", ErrInvalidConnectionString, s)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("%w: port %q is not a number in 1..65535", ErrInvalidConnectionString, port)
	}
	return net.JoinHostPort(host, port), nil
}

func applyConnOption(key, v string, c *config) error {
	badValue := func(what string) error {
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
		return fmt.Errorf("%w: unknown option %q (known: %s)", ErrInvalidConnectionString, key, strings.Join(connStringKeys, ", "))
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	switch s {
	case "0", "off", "none", "disabled":
		return 0, nil
	}
	return wire.ParseHumanDuration(s)
}
