package webhook

import (
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/stretchr/testify/require"
)

// The source conformance suite, with a provider that delivers each
// record in order and retries until it gets a 2xx: the "external system"
// is the provider's outbox, and a record leaves it only once stored.
func TestConformance(t *testing.T) {
	addr := freeAddr(t)
	p := newProvider(t, "http://"+addr+"/sw")
	out := newSequential(t, p)
	n := 0
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := build(t, standardValues("address", addr), standardEnv)
			require.NoError(t, err)
			return s
		},
		Add: func(t *testing.T, k int) []string {
			var payloads []string
			for range k {
				body := fmt.Sprintf(`{"n":%d}`, n)
				out.queue <- [2]string{fmt.Sprintf("d-%d", n), body}
				payloads = append(payloads, body)
				n++
			}
			return payloads
		},
		StableIDs: true,
	})
}
