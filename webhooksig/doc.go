// Package webhooksig signs and verifies webhook requests: one place for
// the schemes Ferry speaks, used by the webhook source (verify), the http
// sink and webhook hooks (sign).
//
// Schemes:
//
//   - Standard Webhooks (https://www.standardwebhooks.com, spec at
//     https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
//     headers webhook-id, webhook-timestamp (unix seconds) and
//     webhook-signature, a space-separated list of "v1,<base64 HMAC-SHA256
//     of id.timestamp.body>"; secrets are "whsec_" + base64 of the key.
//     SignStandard, SetStandardHeaders, VerifyStandard.
//   - GitHub: X-Hub-Signature-256: "sha256=" + hex HMAC-SHA256 of the body
//     (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
//     GitHub (an HMAC value).
//   - Stripe: Stripe-Signature: "t=<unix seconds>,v1=<hex HMAC-SHA256 of
//     t.body>" with possibly several v1 entries and others (v0) ignored
//     (https://docs.stripe.com/webhooks#verify-manually). SignStripe,
//     VerifyStripe. Stripe's secret (whsec_...) is used as it is, not
//     base64-decoded, as Stripe's libraries do.
//   - Generic HMAC over the body: algorithm sha1, sha256 or sha512,
//     encoding hex or base64, an optional prefix (HMAC).
//
// Guarantees: every comparison of a signature is in constant time
// (hmac.Equal); every Verify takes several secrets (rotation: any one
// matching is enough); a timestamp further than the tolerance from now,
// either way, is ErrStale; errors never contain a secret or an expected
// signature, only what was wrong with what was received (cut short).
// Verifying a signature says nothing about replays within the tolerance:
// the receiver keeps the ids it acted on (the webhook source does, in its
// persisted window).
//
// Tested against each provider's documented test vectors (GitHub's
// example secret, payload and signature; the Standard Webhooks reference
// library's signing example; Stripe's documented scheme) and against an
// independent implementation of the Standard Webhooks spec in the tests;
// the parsers of signature headers are fuzzed.
//
// Left out: Standard Webhooks' asymmetric "v1a" (ed25519) signatures
// (ignored when verifying, never produced), and schemes that sign more
// than the body and a timestamp (Twilio's URL + form parameters, AWS SNS
// certificates).
package webhooksig
