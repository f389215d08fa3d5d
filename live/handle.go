package live

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/iggy"
)

// Handle is a connection to one Iggy server with a consumer side (the
// client Streams and Maps poll on) and a producer side (the client Targets
// send on). Connect gives each side its own connection, so a busy poll
// loop never delays a Target's sends; FromClient uses one client for both.
//
// A Handle is safe for concurrent use. Close it after the Streams, Maps
// and Targets made from it.
type Handle struct {
	id       string
	consumer *iggy.Client
	producer *iggy.Client
	owned    bool

	mu     sync.Mutex
	closed bool
}

// Connect dials target twice (a consumer and a producer connection) and
// logs in with the credentials it carries. target is "host:port" or an Iggy
// connection string such as "iggy://user:password@host:port" (see package
// iggy for the forms and query options); opts are passed to iggy.Dial and
// override the connection string. The handle's ID is the server address:
// the credentials are used to log in and then dropped.
func Connect(ctx context.Context, target string, opts ...iggy.Option) (*Handle, error) {
	consumer, err := iggy.Dial(ctx, target, opts...)
	if err != nil {
		return nil, fmt.Errorf("live: connect (consumer side): %w", err)
	}
	producer, err := iggy.Dial(ctx, target, opts...)
	if err != nil {
		_ = consumer.Close()
		return nil, fmt.Errorf("live: connect (producer side): %w", err)
	}
	return &Handle{id: consumer.Addr(), consumer: consumer, producer: producer, owned: true}, nil
}

// FromClient wraps a client the caller built and still owns: the handle
// uses it for both sides, and Close leaves it open. id names the handle in
// logs, errors and target state; "" means the client's address. Should id
// be a connection string, its credentials and query are dropped, so ID
// never returns a secret.
func FromClient(c *iggy.Client, id string) *Handle {
	if id == "" {
		id = c.Addr()
	}
	return &Handle{id: sanitizeID(id), consumer: c, producer: c}
}

// sanitizeID strips the user information and query of a URL-like id.
func sanitizeID(id string) string {
	scheme, rest, ok := strings.Cut(id, "://")
	if !ok {
		if at := strings.LastIndexByte(id, '@'); at >= 0 {
			return id[at+1:]
		}
		return id
	}
	u, err := url.Parse(id)
	if err != nil || u.Host == "" {
		// Not a parsable URL: keep what follows the last '@' and drop
		// any query, which may hold a token.
		rest, _, _ = strings.Cut(rest, "?")
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			rest = rest[at+1:]
		}
		return scheme + "://" + rest
	}
	return scheme + "://" + u.Host + u.EscapedPath()
}

// ID identifies the server: its address (host:port), or the id given to
// FromClient. It never holds credentials.
func (h *Handle) ID() string { return h.id }

// String returns "live.Handle(ID)".
func (h *Handle) String() string { return "live.Handle(" + h.id + ")" }

// ConsumerClient returns the client Streams and Maps poll on.
func (h *Handle) ConsumerClient() *iggy.Client { return h.consumer }

// ProducerClient returns the client Targets send on.
func (h *Handle) ProducerClient() *iggy.Client { return h.producer }

// Close closes the connections Connect opened; a handle from FromClient
// leaves its client open. Close does not close the Streams, Maps and
// Targets made from the handle: close those first. It is idempotent.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.owned {
		h.closed = true
		return nil
	}
	h.closed = true
	err1 := h.consumer.Close()
	err2 := h.producer.Close()
	if err1 != nil {
		return err1
	}
	return err2
}
