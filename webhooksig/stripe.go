package webhooksig

import (
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StripeHeader is the header Stripe sends its signature in.
const StripeHeader = "Stripe-Signature"

// SignStripe returns a Stripe-Signature value for one secret:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>". The
// secret is the endpoint's signing secret as Stripe shows it (whsec_...),
// used as bytes.
func SignStripe(secret []byte, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(SHA256, secret, []byte(t), []byte{'.'}, body))
}

// VerifyStripe checks a Stripe-Signature value against the exact body
// with each secret, against now: the t element is the signed timestamp,
// every v1 element a candidate signature (Stripe sends several while a
// secret is being rolled), other elements (v0) are ignored.
func VerifyStripe(secrets [][]byte, value string, body []byte, tolerance time.Duration, now time.Time) error {
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	if strings.TrimSpace(value) == "" {
		return fmt.Errorf("%w: no %s", ErrMissing, StripeHeader)
	}
	var ts string
	var v1 [][]byte
	for _, el := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(el), "=")
		if !ok {
			return fmt.Errorf("%w: %s element %s is not key=value", ErrMalformed, StripeHeader, quote(el))
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			got, err := hex.DecodeString(v)
			if err != nil {
				return fmt.Errorf("%w: %s v1 %s is not hex", ErrMalformed, StripeHeader, quote(v))
			}
			v1 = append(v1, got)
		}
	}
	if ts == "" {
		return fmt.Errorf("%w: %s has no t= timestamp", ErrMalformed, StripeHeader)
	}
	if len(v1) == 0 {
		return fmt.Errorf("%w: %s has no v1= signature", ErrMalformed, StripeHeader)
	}
	if err := checkTimestamp(ts, tolerance, now); err != nil {
		return err
	}
	for _, s := range secrets {
		want := mac(SHA256, s, []byte(ts), []byte{'.'}, body)
		for _, got := range v1 {
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrMismatch
}
