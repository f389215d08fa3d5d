package broker

// Admission caps the connections the broker holds (Config.MaxConns) and
// those that have not logged in (Config.MaxUnauthConns), so that sockets
// that never log in can neither exhaust the process's file descriptors
// nor keep a client that does log in from connecting.
//
// Connections that have not logged in wait in a queue, oldest first. A
// new connection that would pass either cap closes the oldest waiting
// one instead (a client that logs in promptly is at the back of the
// queue, far from eviction); if every connection has logged in and the
// total cap is reached, the new connection is closed at once, before
// anything is read or written: the protocol has no reply without a
// request, and an eviction frame would be read as the answer to the
// client's first request. Both are logged at most once per
// admissionWarnEvery, with counts.
//
// Everything here runs under Broker.connsMu.

import (
	"container/list"
	"time"
)

const admissionWarnEvery = 10 * time.Second

// admission is the broker's connection accounting, guarded by
// Broker.connsMu.
type admission struct {
	waiting list.List // *conn that have not logged in, oldest first
	evicted logQuota  // oldest waiting connection closed for a new one
	refused logQuota  // new connection closed: every slot logged in
}

// admit registers a freshly accepted connection, making room as the caps
// require, and reports whether it may be served. A false return means
// the caller must close it.
func (b *Broker) admit(c *conn) bool {
	now := time.Now()
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	if b.closing {
		return false
	}
	a := &b.admission
	if len(b.conns) >= b.cfg.MaxConns && a.waiting.Len() == 0 {
		if n, ok := a.refused.allow(now, admissionWarnEvery); ok {
			b.log.Warn("refusing connections: every connection is logged in and the cap is reached",
				"max_conns", b.cfg.MaxConns, "refused", n)
		}
		return false
	}
	if len(b.conns) >= b.cfg.MaxConns || a.waiting.Len() >= b.cfg.MaxUnauthConns {
		old := a.waiting.Remove(a.waiting.Front()).(*conn)
		old.waiting = nil
		delete(b.conns, old.id)
		old.close()
		if n, ok := a.evicted.allow(now, admissionWarnEvery); ok {
			b.log.Warn("closing the oldest connections that have not logged in, to admit new ones",
				"max_conns", b.cfg.MaxConns, "max_unauth_conns", b.cfg.MaxUnauthConns, "closed", n)
		}
	}
	b.conns[c.id] = c
	c.waiting = a.waiting.PushBack(c)
	return true
}

// loggedIn takes c out of the queue of connections that have not logged
// in; a no-op if it was evicted meanwhile.
func (b *Broker) loggedIn(c *conn) {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	if c.waiting != nil {
		b.admission.waiting.Remove(c.waiting)
		c.waiting = nil
	}
}

// loggedOut puts c, which has just logged out, back at the end of the
// queue. It is not evicted for this: the caps bind new connections.
func (b *Broker) loggedOut(c *conn) {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	if _, live := b.conns[c.id]; live && c.waiting == nil {
		c.waiting = b.admission.waiting.PushBack(c)
	}
}

// dropConn forgets c when its reader ends.
func (b *Broker) dropConn(c *conn) {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	delete(b.conns, c.id)
	if c.waiting != nil {
		b.admission.waiting.Remove(c.waiting)
		c.waiting = nil
	}
}

// connCounts returns the connections held and those not logged in.
func (b *Broker) connCounts() (total, unauth int) {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	return len(b.conns), b.admission.waiting.Len()
}
