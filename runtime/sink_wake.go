package runtime

import (
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// appendWake turns on self-consumption without a round trip (issue 16,
// item 7): with the embedded broker, a sink whose partitions are all read
// to their end is woken by the broker's next append to its topic instead
// of polling again after poll_interval. Offsets are still stored only
// after Consume, and a sink that is behind polls as before. Benchmarks
// turn it off to measure the difference.
var appendWake = true

// wakeOption is the iggy.WithWake option of a sink's consumer of
// stream/topic, or nil when the broker is not in this process.
func (r *Runtime) wakeOption(stream, topic string) iggy.ConsumerOption {
	b := r.broker
	if b == nil || !appendWake {
		return nil
	}
	s, t := wire.NamedID(stream), wire.NamedID(topic)
	return iggy.WithWake(func() <-chan struct{} {
		ch, err := b.AppendSignal(s, t)
		if err != nil {
			return nil // not there (yet): poll as usual
		}
		return ch
	})
}
