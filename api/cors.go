package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ferryhq/ferry/config"
)

// cors applies [http.cors] the way upstream's CORS layer (tower-http) does:
//
//   - Access-Control-Allow-Origin is "*" when allowed_origins starts with
//     "*", the request's Origin when it is in the list, and absent
//     otherwise (also for an empty list);
//   - Access-Control-Allow-Credentials: true with allow_credentials;
//   - Access-Control-Allow-Private-Network: true with allow_private_network,
//     when the request asks for it;
//   - every OPTIONS request is a preflight: it is answered 200 here, with
//     Access-Control-Allow-Methods and -Headers, without reaching the API
//     (so without the API key);
//   - other responses get Access-Control-Expose-Headers.
//
// It runs outside authentication, so 401 answers carry the headers too.
type cors struct {
	anyOrigin      bool
	origins        map[string]bool
	methods        string
	headers        string
	expose         string
	credentials    bool
	privateNetwork bool
}

// vary is what a response depends on, as upstream sends it.
const vary = "origin, access-control-request-method, access-control-request-headers"

func newCORS(c config.CORS) (*cors, error) {
	p := &cors{origins: map[string]bool{}, credentials: c.AllowCredentials, privateNetwork: c.AllowPrivateNetwork}
	for i, o := range c.AllowedOrigins {
		switch {
		case o == "*" && i == 0:
			p.anyOrigin = true
		case o == "*":
			return nil, fmt.Errorf(`api: http.cors.allowed_origins[%d]: "*" allows any origin only as the first and only entry`, i)
		case !validOrigin(o):
			return nil, fmt.Errorf("api: http.cors.allowed_origins[%d]: %q is not a valid origin", i, o)
		default:
			p.origins[o] = true
		}
	}
	if p.anyOrigin && len(c.AllowedOrigins) > 1 {
		return nil, fmt.Errorf(`api: http.cors.allowed_origins: "*" allows any origin only as the first and only entry, got %d entries`, len(c.AllowedOrigins))
	}
	if p.anyOrigin && c.AllowCredentials {
		return nil, fmt.Errorf(`api: http.cors: allow_credentials = true cannot be combined with allowed_origins = ["*"] (browsers refuse it); list the origins instead`)
	}
	var methods []string
	for i, m := range c.AllowedMethods {
		if m == "" {
			continue
		}
		u := strings.ToUpper(m)
		switch u {
		case "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE":
			methods = append(methods, u)
		default:
			return nil, fmt.Errorf("api: http.cors.allowed_methods[%d]: expected an HTTP method such as GET, POST, PUT, DELETE; got %q", i, m)
		}
	}
	p.methods = strings.Join(methods, ",")
	var err error
	if p.headers, err = headerList("allowed_headers", c.AllowedHeaders); err != nil {
		return nil, err
	}
	if p.expose, err = headerList("exposed_headers", c.ExposedHeaders); err != nil {
		return nil, err
	}
	return p, nil
}

// headerList checks and joins header names, lower-cased, skipping empty
// entries (upstream's default exposed_headers is [""]).
func headerList(key string, names []string) (string, error) {
	var out []string
	for i, n := range names {
		if n == "" {
			continue
		}
		if n != "*" && !validToken(n) {
			return "", fmt.Errorf("api: http.cors.%s[%d]: %q is not a valid header name", key, i, n)
		}
		out = append(out, strings.ToLower(n))
	}
	return strings.Join(out, ","), nil
}

func (p *cors) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if p.anyOrigin {
			h.Set("Access-Control-Allow-Origin", "*")
		} else if o := r.Header.Get("Origin"); o != "" && p.origins[o] {
			h.Set("Access-Control-Allow-Origin", o)
		}
		if p.credentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		if p.privateNetwork && r.Header.Get("Access-Control-Request-Private-Network") == "true" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		h.Add("Vary", vary)
		if r.Method == http.MethodOptions {
			if p.methods != "" {
				h.Set("Access-Control-Allow-Methods", p.methods)
			}
			if p.headers != "" {
				h.Set("Access-Control-Allow-Headers", p.headers)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if p.expose != "" {
			h.Set("Access-Control-Expose-Headers", p.expose)
		}
		next.ServeHTTP(w, r)
	})
}

// validToken reports whether s is an HTTP token (RFC 9110), as header
// names are.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validOrigin reports whether s can be sent as a header value: visible
// ASCII without spaces.
func validOrigin(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
