package stdout

import (
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	out := &connectortest.Output{}
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(*testing.T) connector.Sink { return NewWriter(out, true) },
		Read: func(t *testing.T) []string {
			var payloads []string
			for _, l := range out.Lines() {
				// "stream/topic partition N offset N PAYLOAD"
				if f := strings.SplitN(l, " ", 6); len(f) == 6 {
					payloads = append(payloads, f[5])
				}
			}
			return payloads
		},
	})
}
