package broker

import (
	"fmt"
	"sync"

	"github.com/ferryhq/ferry/iggy/wire"
)

// appendSignal wakes whoever waits for a topic's next append: a consumer
// in the same process whose partitions were all read to their end gets
// the next batch as soon as it is appended instead of on its next poll
// (Broker.AppendSignal). A channel is made only when someone waits, and
// closed by the first append after that, so a topic nobody waits on
// pays one uncontended lock per send.
type appendSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next append.
func (s *appendSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// fire wakes the waiters, if any.
func (s *appendSignal) fire() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// AppendSignal returns a channel that is closed when messages are next
// appended to any partition of stream/topic (by name or numeric id, as
// the protocol's identifiers). Take it before reading the partitions:
// an append between the read and the wait then still wakes the waiter.
// A topic deleted meanwhile never closes it: a waiter keeps a timeout.
func (b *Broker) AppendSignal(stream, topic wire.Identifier) (<-chan struct{}, error) {
	b.mu.RLock()
	s, t := b.lookupTopic(stream, topic)
	b.mu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("broker: append signal of %s/%s: %w", stream, topic, wire.ErrorFor(topicMissing(s, t)))
	}
	return t.appended.wait(), nil
}
