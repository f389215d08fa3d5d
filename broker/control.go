package broker

// Fault injection, after franz-go kfake's ControlKey: a test registers a
// function for one command; the function sees each request for it (after
// header validation, before the session rules) and returns an Action: let
// it through (the zero Action), delay it, replace the reply's status or
// body, send nothing, or drop the connection.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Request is what a control function sees of an intercepted request.
type Request struct {
	// Command is the request's command code (mapped from the operation for
	// replicated requests).
	Command wire.Command
	Header  wire.RequestHeader
	// Body aliases the connection's buffer: valid only during the call.
	Body []byte
	// ConnID is the broker's id of the connection (get_clients reports its
	// low 32 bits).
	ConnID uint64
}

// Action is a control function's verdict. The zero Action lets the broker
// handle the request normally; the fields combine as listed.
type Action struct {
	// Delay holds the request this long first (Close cuts it short).
	Delay time.Duration
	// Drop closes the connection without a reply.
	Drop bool
	// NoReply discards the request: no handling, no reply.
	NoReply bool
	// Status replies this status with an empty body instead of handling.
	Status wire.Code
	// Body, when non-nil, is replied (status 0) instead of handling. It is
	// the whole reply body: include the result section where the
	// operation has one.
	Body []byte
}

type control struct {
	cmd  wire.Command
	fn   func(Request) Action
	once bool
}

type controls struct {
	n    atomic.Int32
	mu   sync.Mutex
	list []*control
}

// Control calls fn for every request for cmd until cancel is called.
// Controls run in registration order; the first one for a command wins.
func (b *Broker) Control(cmd wire.Command, fn func(Request) Action) (cancel func()) {
	return b.controls.add(&control{cmd: cmd, fn: fn})
}

// ControlOnce is Control for the next request for cmd only.
func (b *Broker) ControlOnce(cmd wire.Command, fn func(Request) Action) (cancel func()) {
	return b.controls.add(&control{cmd: cmd, fn: fn, once: true})
}

func (cs *controls) add(c *control) func() {
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.n.Add(1)
	cs.mu.Unlock()
	return func() { cs.remove(c) }
}

func (cs *controls) remove(c *control) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i, x := range cs.list {
		if x == c {
			cs.list = append(cs.list[:i:i], cs.list[i+1:]...)
			cs.n.Add(-1)
			return true
		}
	}
	return false
}

func (cs *controls) find(cmd wire.Command) *control {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.list {
		if c.cmd == cmd {
			return c
		}
	}
	return nil
}

// run applies the control for r's command, if any, and reports whether
// it decided the reply.
func (cs *controls) run(b *Broker, r *request) (reply, bool) {
	if cs.n.Load() == 0 {
		return reply{}, false
	}
	c := cs.find(r.cmd())
	if c == nil || (c.once && !cs.remove(c)) {
		return reply{}, false
	}
	act := c.fn(Request{Command: r.cmd(), Header: r.h, Body: r.body, ConnID: r.c.id})
	if act.Delay > 0 {
		t := time.NewTimer(act.Delay)
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			return reply{silent: true, drop: true}, true
		}
	}
	switch {
	case act.Drop:
		return reply{silent: true, drop: true}, true
	case act.NoReply:
		return reply{silent: true}, true
	case act.Status != 0:
		return status(act.Status), true
	case act.Body != nil:
		return raw(append([]byte(nil), act.Body...)), true
	}
	return reply{}, false
}
