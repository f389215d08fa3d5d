package webhook

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// authEndpoints is a source with verify = "bearer" and verify = "basic"
// endpoints holding the credentials of RFC 6750's and RFC 7617's examples,
// and one of each holding other credentials.
func authEndpoints(t *testing.T) *Source {
	env := map[string]string{
		"RFC6750": "mF_9.B5f-4.1JqM", "OTHER_TOKEN": "mF_9.B5f-4.1JqN",
		"RFC7617": "Aladdin:open sesame", "RFC7617_UTF8": "test:123£", "OTHER_BASIC": "Aladdin:open sesame!",
		"COLON": "Aladdin:open:sesame",
	}
	s := open(t, map[string]any{"endpoints": []any{
		endpointTable("path", "/bearer", "verify", "bearer", "secret_env", []any{"RFC6750"}, "format", "raw"),
		endpointTable("path", "/bearer-other", "verify", "bearer", "secret_env", []any{"OTHER_TOKEN"}, "format", "raw"),
		endpointTable("path", "/basic", "verify", "basic", "secret_env", []any{"RFC7617"}, "format", "raw"),
		endpointTable("path", "/basic-utf8", "verify", "basic", "secret_env", []any{"RFC7617_UTF8"}, "format", "raw"),
		endpointTable("path", "/basic-other", "verify", "basic", "secret_env", []any{"OTHER_BASIC"}, "format", "raw"),
		endpointTable("path", "/basic-colon", "verify", "basic", "secret_env", []any{"COLON"}, "format", "raw"),
	}}, env)
	ackAll(t, s)
	return s
}

// postAuth posts a body to path with the Authorization field values given
// (none: no field) and returns the status.
func postAuth(t *testing.T, s *Source, path string, authorization ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, addrURL(s, path), strings.NewReader("payload"))
	require.NoError(t, err)
	for _, v := range authorization {
		req.Header.Add("Authorization", v)
	}
	st, _ := do(t, req)
	return st
}

// RFC 6750 section 2.1's example, "Authorization: Bearer mF_9.B5f-4.1JqM".
// Its syntax is credentials = "Bearer" 1*SP b64token: the scheme is an
// ABNF string literal, case-insensitive (RFC 5234 section 2.3, and RFC
// 9110 section 11.1: "a case-insensitive token"), one or more spaces
// follow it, and the token itself is compared exactly.
func TestBearerRFC6750Example(t *testing.T) {
	t.Parallel()
	s := authEndpoints(t)
	const token = "mF_9.B5f-4.1JqM"
	for _, v := range []string{
		"Bearer " + token,
		"bearer " + token,
		"BEARER " + token,
		"Bearer   " + token, // 1*SP
		"Bearer " + token + " ",
	} {
		require.Equal(t, http.StatusOK, postAuth(t, s, "/bearer", v), "%q is RFC 6750's credentials and must be accepted", v)
	}
	for _, v := range [][]string{
		nil,                                     // no Authorization field
		{""},                                    // an empty one
		{"Bearer"},                              // no token
		{"Bearer "},                             // no token
		{"Bearer" + token},                      // no space after the scheme
		{"Bearer\t" + token},                    // a tab is not SP
		{"Bearer " + strings.ToLower(token)},    // the token is case-sensitive
		{"Bearer " + token[:len(token)-1]},      // a prefix of the token
		{"Bearer " + token + "x"},               // more than the token
		{"Bearer " + token + " " + token},       // two tokens
		{"Basic " + token},                      // another scheme
		{"Token " + token},                      // another scheme
		{token},                                 // no scheme
		{"Bearer=" + token},                     // not the syntax
		{"Bearer " + strings.Repeat("A", 4096)}, // long garbage
		// Authorization is a singleton field (RFC 9110 section 5.3):
		// sent twice, it is refused even if one of them matches.
		{"Bearer " + token, "Bearer " + token},
		{"Bearer nope", "Bearer " + token},
	} {
		require.Equal(t, http.StatusUnauthorized, postAuth(t, s, "/bearer", v...), "%q must be refused", v)
	}
	// The example's credentials at an endpoint configured with another
	// token are refused.
	require.Equal(t, http.StatusUnauthorized, postAuth(t, s, "/bearer-other", "Bearer "+token))
	require.Equal(t, http.StatusOK, postAuth(t, s, "/bearer-other", "Bearer mF_9.B5f-4.1JqN"))
}

// RFC 7617 section 2's example: user-id "Aladdin", password "open sesame",
// "Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", and section 2.1's
// UTF-8 one: user-id "test", password "123£", "dGVzdDoxMjPCow==". "Note
// that both scheme and parameter names are matched case-insensitively"
// (section 2); credentials = auth-scheme 1*SP token68 (RFC 9110 section
// 11.4); the user-id and password are separated by the first colon ("a
// user-id containing a colon character is invalid"), so a password may
// hold colons.
func TestBasicRFC7617Example(t *testing.T) {
	t.Parallel()
	s := authEndpoints(t)
	const cred = "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
	// The example's encoding, checked independently of the source.
	require.Equal(t, cred, base64.StdEncoding.EncodeToString([]byte("Aladdin:open sesame")))
	require.Equal(t, "dGVzdDoxMjPCow==", base64.StdEncoding.EncodeToString([]byte("test:123£")))
	for _, v := range []string{
		"Basic " + cred,
		"basic " + cred,
		"BASIC " + cred,
		"Basic   " + cred, // 1*SP
	} {
		require.Equal(t, http.StatusOK, postAuth(t, s, "/basic", v), "%q is RFC 7617's credentials and must be accepted", v)
	}
	req, err := http.NewRequest(http.MethodPost, addrURL(s, "/basic"), strings.NewReader("payload"))
	require.NoError(t, err)
	req.SetBasicAuth("Aladdin", "open sesame")
	require.Equal(t, "Basic "+cred, req.Header.Get("Authorization"))
	st, _ := do(t, req)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, http.StatusOK, postAuth(t, s, "/basic-utf8", "Basic dGVzdDoxMjPCow=="), "RFC 7617 section 2.1's UTF-8 example")

	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, v := range [][]string{
		nil,
		{""},
		{"Basic"},
		{"Basic "},
		{"Basic" + cred},                         // no space after the scheme
		{"Bearer " + cred},                       // another scheme
		{cred},                                   // no scheme
		{"Basic " + enc("Aladdin:open sesame!")}, // another password
		{"Basic " + enc("aladdin:open sesame")},  // the user-id differs in case
		{"Basic " + enc("Aladdin:Open sesame")},  // the password differs in case
		{"Basic " + enc("Aladdin")},              // no colon
		{"Basic " + enc("Aladdin open sesame")},  // no colon
		{"Basic " + enc(":open sesame")},         // no user-id
		{"Basic !!!not base64!!!"},
		{"Basic " + cred + " " + cred},
		{"Basic " + strings.Repeat("A", 4096)},
		{"Basic " + cred, "Basic " + cred}, // a singleton field sent twice
	} {
		require.Equal(t, http.StatusUnauthorized, postAuth(t, s, "/basic", v...), "%q must be refused", v)
	}
	require.Equal(t, http.StatusUnauthorized, postAuth(t, s, "/basic-other", "Basic "+cred), "the example's credentials at an endpoint with another password")
	require.Equal(t, http.StatusOK, postAuth(t, s, "/basic-other", "Basic "+enc("Aladdin:open sesame!")))
	// A password with colons: split at the first one.
	require.Equal(t, http.StatusOK, postAuth(t, s, "/basic-colon", "Basic "+enc("Aladdin:open:sesame")))
	require.Equal(t, http.StatusUnauthorized, postAuth(t, s, "/basic-colon", "Basic "+cred))
}
