package api

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/ferryhq/ferry/config"
)

// containmentWarnings are the startup warnings upstream logs, one per
// missing control, each on its own: no API key beyond loopback; no API key
// while CORS admits any origin (or "null"), which a browser on the same
// host can use even on loopback; no TLS beyond loopback. The API key is
// never part of a message.
func containmentWarnings(ctx context.Context, c config.HTTP) []string {
	var out []string
	noKey := c.APIKey == ""
	exposed := beyondLoopback(ctx, c.Address)
	if noKey && exposed {
		out = append(out, "management API on "+c.Address+" has no http.api_key: it accepts only the local token, which only this machine's user running Ferry can read, so other hosts cannot use it; set api_key to manage it from elsewhere, or bind to 127.0.0.1")
	}
	if noKey && c.CORS.Enabled && allowsUnownedOrigin(c.CORS.AllowedOrigins) {
		out = append(out, `management API has http.cors allowing "*" or "null" origins and no http.api_key: any web page the operator opens can read and change its configuration; set api_key or list the origins you own`)
	}
	if exposed && !c.TLS.Enabled {
		out = append(out, "management API on "+c.Address+" has http.tls disabled: the api-key header and the credentials in connector configurations cross the network in cleartext; enable [http.tls] or put a TLS proxy in front")
	}
	return out
}

// allowsUnownedOrigin: "*" first (any origin), or "null" anywhere (sandboxed
// frames, data: URLs and file:// pages send it).
func allowsUnownedOrigin(origins []string) bool {
	return (len(origins) > 0 && origins[0] == "*") || slices.Contains(origins, "null")
}

// beyondLoopback reports whether address resolves to anything but loopback
// addresses. An empty host (all interfaces), a name that does not resolve
// and an empty answer all count as exposed.
func beyondLoopback(ctx context.Context, address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return !ip.IsLoopback()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return true
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return true
		}
	}
	return false
}
