package webhooksig_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/webhooksig"
	"github.com/stretchr/testify/require"
)

// GitHub's documented test values, from "Testing the webhook payload
// validation" in
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
func TestGitHubDocumentedVector(t *testing.T) {
	secret := []byte("It's a Secret to Everybody")
	body := []byte("Hello, World!")
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	require.Equal(t, want, webhooksig.GitHub.Sign(secret, body))
	require.NoError(t, webhooksig.GitHub.Verify([][]byte{secret}, want, body))
	// Rotation: the old secret first, the right one second.
	require.NoError(t, webhooksig.GitHub.Verify([][]byte{[]byte("old"), secret}, want, body))
	// Uppercase hex is the same signature.
	require.NoError(t, webhooksig.GitHub.Verify([][]byte{secret}, "sha256="+strings.ToUpper(want[7:]), body))
	require.ErrorIs(t, webhooksig.GitHub.Verify([][]byte{secret}, want, []byte("Hello, World?")), webhooksig.ErrMismatch)
	require.ErrorIs(t, webhooksig.GitHub.Verify([][]byte{[]byte("wrong")}, want, body), webhooksig.ErrMismatch)
	require.ErrorIs(t, webhooksig.GitHub.Verify([][]byte{secret}, want[7:], body), webhooksig.ErrMalformed)
	require.ErrorIs(t, webhooksig.GitHub.Verify([][]byte{secret}, "sha256=abc", body), webhooksig.ErrMalformed)
	require.ErrorIs(t, webhooksig.GitHub.Verify([][]byte{secret}, "", body), webhooksig.ErrMissing)
	require.ErrorIs(t, webhooksig.GitHub.Verify(nil, want, body), webhooksig.ErrNoSecret)
}

// The signing example of the Standard Webhooks reference library
// (TestWebhookSign in
// https://github.com/standard-webhooks/standard-webhooks/blob/main/libraries/go/webhook_test.go,
// the same values as the spec's example secret and message id in
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
func TestStandardWebhooksDocumentedVector(t *testing.T) {
	key, err := webhooksig.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	const id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	const want = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	require.Equal(t, want, webhooksig.SignStandard(key, id, ts, body))

	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", want)
	got, err := webhooksig.VerifyStandard([][]byte{key}, h, body, 5*time.Minute, ts.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, id, got)
	// The prefix is optional, as in the reference library.
	bare, err := webhooksig.ParseSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Equal(t, key, bare)
}

// standardSign is an independent implementation of the Standard Webhooks
// spec's signing, from its text alone: the key is the base64 part of the
// secret after "whsec_"; the signed content is id "." timestamp "." body;
// the signature HMAC-SHA256, base64, prefixed "v1,".
func standardSign(secret, id string, ts int64, body string) string {
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// standardVerify is the spec's verification, written separately: each
// space-separated "version,signature" whose version is v1 is compared.
func standardVerify(secret string, h http.Header, body string) bool {
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		return false
	}
	want := standardSign(secret, h.Get("webhook-id"), ts, body)
	for _, s := range strings.Split(h.Get("webhook-signature"), " ") {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func TestStandardWebhooksAgainstAnIndependentImplementation(t *testing.T) {
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key of thirty-two bytes!"))}
	var keys [][]byte
	for _, s := range secrets {
		k, err := webhooksig.ParseSecret(s)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	now := time.Unix(1700000000, 0)
	for i, body := range []string{"", "{}", `{"a":"ü","b":[1,2,3]}`, strings.Repeat("x", 10000), "line\nbreak\r\n"} {
		id := "msg_" + strconv.Itoa(i)
		h := http.Header{}
		webhooksig.SetStandardHeaders(h, keys, id, now, []byte(body))
		require.Equal(t, strconv.FormatInt(now.Unix(), 10), h.Get("webhook-timestamp"), "case %d", i)
		for _, s := range secrets {
			require.True(t, standardVerify(s, h, body), "case %d: the independent verifier refused our signature with %s", i, s[:10])
		}
		// And ours accepts the independent implementation's signature.
		h2 := http.Header{}
		h2.Set("webhook-id", id)
		h2.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h2.Set("webhook-signature", "v1a,ignored "+standardSign(secrets[1], id, now.Unix(), body))
		got, err := webhooksig.VerifyStandard(keys[1:], h2, []byte(body), time.Minute, now)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, id, got)
	}
}

func TestStandardWebhooksRefusals(t *testing.T) {
	key, _ := webhooksig.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	now := time.Unix(1700000000, 0)
	body := []byte(`{"x":1}`)
	signed := func() http.Header {
		h := http.Header{}
		webhooksig.SetStandardHeaders(h, [][]byte{key}, "msg_1", now, body)
		return h
	}
	verify := func(h http.Header, b []byte, at time.Time) error {
		_, err := webhooksig.VerifyStandard([][]byte{key}, h, b, 5*time.Minute, at)
		return err
	}
	require.NoError(t, verify(signed(), body, now))
	require.ErrorIs(t, verify(signed(), []byte(`{"x":2}`), now), webhooksig.ErrMismatch, "altered body")
	h := signed()
	h.Set("webhook-id", "msg_2")
	require.ErrorIs(t, verify(h, body, now), webhooksig.ErrMismatch, "altered id")
	require.ErrorIs(t, verify(signed(), body, now.Add(6*time.Minute)), webhooksig.ErrStale, "stale")
	require.ErrorIs(t, verify(signed(), body, now.Add(-6*time.Minute)), webhooksig.ErrStale, "from the future")
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h := signed()
		h.Del(name)
		require.ErrorIs(t, verify(h, body, now), webhooksig.ErrMissing, name)
	}
	for _, bad := range []string{"v1", "v1,!!!", "v2,abcd"} {
		h := signed()
		h.Set("webhook-signature", bad)
		require.ErrorIs(t, verify(h, body, now), webhooksig.ErrMalformed, bad)
	}
	h = signed()
	h.Set("webhook-timestamp", "-5")
	require.ErrorIs(t, verify(h, body, now), webhooksig.ErrMalformed)
	_, err := webhooksig.ParseSecret("whsec_not base64!")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "not base64!")
}

// Stripe's documented scheme (https://docs.stripe.com/webhooks#verify-manually):
// signed_payload = timestamp + "." + the raw body; expected signature =
// hex HMAC-SHA256 with the endpoint's signing secret; the header carries
// t= and one or more v1= (and v0=, ignored). The expected value here is
// computed from those steps, not with the package: the page's example
// header (t=1492774577,v1=5257a869...,v0=6ffbb59b...) comes with no
// secret or body, so it cannot be checked, and the docs publish no other
// vector (searched for issue 16); its timestamp and v0 are reused here.
func TestStripeDocumentedScheme(t *testing.T) {
	secret := []byte("whsec_test_secret")
	body := []byte(`{"id":"evt_1","object":"event"}`)
	ts := int64(1492774577)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10) + "." + string(body)))
	sig := hex.EncodeToString(m.Sum(nil))
	header := "t=" + strconv.FormatInt(ts, 10) + ",v1=" + sig + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
	now := time.Unix(ts+10, 0)
	require.Equal(t, "t=1492774577,v1="+sig, webhooksig.SignStripe(secret, time.Unix(ts, 0), body))
	require.NoError(t, webhooksig.VerifyStripe([][]byte{secret}, header, body, 5*time.Minute, now))
	// Two v1 while Stripe rolls the secret: either matches.
	require.NoError(t, webhooksig.VerifyStripe([][]byte{secret}, "t=1492774577,v1="+strings.Repeat("ab", 32)+",v1="+sig, body, 5*time.Minute, now))
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{[]byte("whsec_other")}, header, body, 5*time.Minute, now), webhooksig.ErrMismatch)
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{secret}, header, body, 5*time.Minute, now.Add(time.Hour)), webhooksig.ErrStale)
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{secret}, "v1="+sig, body, 5*time.Minute, now), webhooksig.ErrMalformed)
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{secret}, "t=1492774577", body, 5*time.Minute, now), webhooksig.ErrMalformed)
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{secret}, "t=1492774577,v1=zz", body, 5*time.Minute, now), webhooksig.ErrMalformed)
	require.ErrorIs(t, webhooksig.VerifyStripe([][]byte{secret}, "", body, 5*time.Minute, now), webhooksig.ErrMissing)
}

func TestGenericHMAC(t *testing.T) {
	secret, body := []byte("k"), []byte("payload")
	for _, c := range []struct {
		alg  string
		sum  func() []byte
		enc  string
		pref string
	}{
		{webhooksig.SHA1, func() []byte { m := hmac.New(sha1.New, secret); m.Write(body); return m.Sum(nil) }, webhooksig.Hex, "sha1="},
		{webhooksig.SHA256, func() []byte { m := hmac.New(sha256.New, secret); m.Write(body); return m.Sum(nil) }, webhooksig.Base64, ""},
		{webhooksig.SHA512, func() []byte { m := hmac.New(sha512.New, secret); m.Write(body); return m.Sum(nil) }, webhooksig.Hex, ""},
	} {
		h := webhooksig.HMAC{Algorithm: c.alg, Encoding: c.enc, Prefix: c.pref}
		require.NoError(t, h.Check())
		want := hex.EncodeToString(c.sum())
		if c.enc == webhooksig.Base64 {
			want = base64.StdEncoding.EncodeToString(c.sum())
		}
		require.Equal(t, c.pref+want, h.Sign(secret, body), c.alg)
		require.NoError(t, h.Verify([][]byte{secret}, c.pref+want, body), c.alg)
	}
	require.Error(t, webhooksig.HMAC{Algorithm: "md5", Encoding: webhooksig.Hex}.Check())
	require.Error(t, webhooksig.HMAC{Algorithm: webhooksig.SHA256, Encoding: "base32"}.Check())
}

// Errors name what was received (cut short), never the secret or the
// expected signature.
func TestErrorsDoNotLeak(t *testing.T) {
	secret := []byte("top-secret-value")
	body := []byte("b")
	good := webhooksig.GitHub.Sign(secret, body)
	err := webhooksig.GitHub.Verify([][]byte{secret}, "sha256="+strings.Repeat("0", 64), body)
	require.True(t, errors.Is(err, webhooksig.ErrMismatch))
	require.NotContains(t, err.Error(), string(secret))
	require.NotContains(t, err.Error(), good[7:])
}
