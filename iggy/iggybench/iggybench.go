// Package iggybench measures an Iggy server with Ferry's client: how fast
// batches of messages are sent to a topic and polled back, and the CPU the
// measuring process spends per message. It owns the run behind
// `ferry bench client`, so a user can compare servers, message sizes and
// clients on their own machine; the Go benchmarks of package iggy measure
// the client itself against an in-process broker.
//
// A run creates its own stream (a random name) with one topic, sends
// Messages messages of Size bytes in batches of Batch from Producers
// connections, polls them all back from Consumers connections, and
// deletes the stream. Polling is by partition (each consumer reads its
// share of the partitions from offset 0, with no offsets stored) or
// through a consumer group (iggy.GroupConsumer, committing each batch).
package iggybench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/cputime"
)

// Poll modes.
const (
	PollPartition = "partition"
	PollGroup     = "group"
)

// Options of a run. Address is required; the zero value of every other
// field takes its default.
type Options struct {
	Address            string
	Username, Password string // default iggy / iggy
	Size               int    // payload bytes, default 100
	Batch              int    // messages per send and per poll, default 1000
	Messages           int    // messages sent and polled, default 1,000,000
	Partitions         int    // default 1
	Producers          int    // sending connections, default 1
	Consumers          int    // polling connections, default 1
	Poll               string // PollPartition (default) or PollGroup
	// Prefetch polls a group with iggy.WithPrefetch (reading the next
	// batch while the current one is counted and committed).
	Prefetch bool
}

// Phase is what one direction measured.
type Phase struct {
	Messages int
	Bytes    int64 // payload bytes
	Elapsed  time.Duration
	// CPU is the user and system time of the whole measuring process
	// over Elapsed (getrusage): with an in-process broker it includes
	// the broker's.
	CPU time.Duration
}

// MessagesPerSecond is messages over elapsed time.
func (p Phase) MessagesPerSecond() float64 { return float64(p.Messages) / p.Elapsed.Seconds() }

// MBPerSecond is payload megabytes (10^6 bytes) over elapsed time.
func (p Phase) MBPerSecond() float64 { return float64(p.Bytes) / 1e6 / p.Elapsed.Seconds() }

// CPUMicrosPerMessage is CPU microseconds per message.
func (p Phase) CPUMicrosPerMessage() float64 {
	return float64(p.CPU.Microseconds()) / float64(p.Messages)
}

// Check fills in o's defaults and reports an option out of range.
func (o *Options) Check() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Size, 100)
	def(&o.Batch, 1000)
	def(&o.Messages, 1_000_000)
	def(&o.Partitions, 1)
	def(&o.Producers, 1)
	def(&o.Consumers, 1)
	if o.Username == "" && o.Password == "" {
		o.Username, o.Password = "iggy", "iggy"
	}
	if o.Poll == "" {
		o.Poll = PollPartition
	}
	switch {
	case o.Address == "":
		return errors.New("address is empty")
	case o.Size < 1 || o.Size > 10<<20:
		return fmt.Errorf("size is %d, want 1 to 10485760 bytes", o.Size)
	case o.Batch < 1 || o.Batch > 100_000:
		return fmt.Errorf("batch is %d, want 1 to 100000", o.Batch)
	case o.Messages < 1:
		return fmt.Errorf("messages is %d, want at least 1", o.Messages)
	case o.Partitions < 1 || o.Partitions > 1000:
		return fmt.Errorf("partitions is %d, want 1 to 1000", o.Partitions)
	case o.Producers < 1 || o.Producers > 256, o.Consumers < 1 || o.Consumers > 256:
		return fmt.Errorf("producers %d and consumers %d, want 1 to 256 each", o.Producers, o.Consumers)
	case o.Poll != PollPartition && o.Poll != PollGroup:
		return fmt.Errorf("poll is %q, want %q or %q", o.Poll, PollPartition, PollGroup)
	case o.Poll == PollPartition && o.Consumers > o.Partitions:
		return fmt.Errorf("%d consumers polling by partition need as many partitions (have %d)", o.Consumers, o.Partitions)
	}
	return nil
}

// Run sends o.Messages messages and polls them back, returning both
// phases. The stream it creates is deleted at the end, also on error.
func Run(ctx context.Context, o Options) (send, poll Phase, err error) {
	if err := o.Check(); err != nil {
		return send, poll, err
	}
	admin, err := o.dial(ctx)
	if err != nil {
		return send, poll, err
	}
	defer admin.Close()
	var suffix [6]byte
	rand.Read(suffix[:])
	name := "ferry-bench-" + hex.EncodeToString(suffix[:])
	if _, err := admin.CreateStream(ctx, name); err != nil {
		return send, poll, fmt.Errorf("create stream %s: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := admin.DeleteStream(dctx, iggy.NamedID(name)); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete stream %s: %w", name, derr))
		}
	}()
	stream, topic := iggy.NamedID(name), iggy.NamedID("bench")
	if _, err := admin.CreateTopic(ctx, stream, "bench", uint32(o.Partitions)); err != nil {
		return send, poll, fmt.Errorf("create topic %s/bench: %w", name, err)
	}
	if send, err = o.send(ctx, stream, topic); err != nil {
		return send, poll, err
	}
	poll, err = o.poll(ctx, stream, topic)
	return send, poll, err
}

func (o *Options) dial(ctx context.Context) (*iggy.Client, error) {
	c, err := iggy.Dial(ctx, o.Address, iggy.WithCredentials(o.Username, o.Password))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", o.Address, err)
	}
	return c, nil
}

// clients dials n connections; close closes them.
func (o *Options) clients(ctx context.Context, n int) (cs []*iggy.Client, close func(), err error) {
	close = func() {
		for _, c := range cs {
			c.Close()
		}
	}
	for range n {
		c, err := o.dial(ctx)
		if err != nil {
			close()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, close, nil
}

// send sends the messages: producer i sends its share, each batch to the
// next partition in turn.
func (o *Options) send(ctx context.Context, stream, topic iggy.Identifier) (Phase, error) {
	cs, closeAll, err := o.clients(ctx, o.Producers)
	if err != nil {
		return Phase{}, err
	}
	defer closeAll()
	payload := make([]byte, o.Size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var next atomic.Int64 // messages claimed by the producers
	start, cpu0 := time.Now(), cputime.Process()
	err = each(len(cs), func(i int) error {
		msgs := make([]iggy.Message, o.Batch)
		for k := 0; ; k++ {
			from := next.Add(int64(o.Batch)) - int64(o.Batch) // this batch's first message
			n := int(min(int64(o.Batch), int64(o.Messages)-from))
			if n <= 0 {
				return nil
			}
			batch := msgs[:n]
			for j := range batch {
				batch[j] = iggy.Message{Payload: payload} // a new id each time, as a producer's
			}
			part := uint32((i + k*len(cs)) % o.Partitions)
			if _, err := cs[i].SendMessages(ctx, stream, topic, iggy.ToPartition(part), batch); err != nil {
				return fmt.Errorf("send: %w", err)
			}
		}
	})
	return Phase{Messages: o.Messages, Bytes: int64(o.Messages) * int64(o.Size), Elapsed: time.Since(start), CPU: cputime.Process() - cpu0}, err
}

// poll reads every message back.
func (o *Options) poll(ctx context.Context, stream, topic iggy.Identifier) (Phase, error) {
	cs, closeAll, err := o.clients(ctx, o.Consumers)
	if err != nil {
		return Phase{}, err
	}
	defer closeAll()
	var got atomic.Int64
	var bytes atomic.Int64
	start, cpu0 := time.Now(), cputime.Process()
	if o.Poll == PollGroup {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err = each(len(cs), func(i int) error {
			opts := []iggy.ConsumerOption{iggy.WithCreateGroup(), iggy.WithPollCount(uint32(o.Batch)), iggy.WithPollInterval(time.Millisecond)}
			if o.Prefetch {
				opts = append(opts, iggy.WithPrefetch())
			}
			g, err := iggy.NewGroupConsumer(cs[i], stream, topic, iggy.NamedID("bench"), opts...)
			if err != nil {
				return fmt.Errorf("group consumer: %w", err)
			}
			defer g.Close(context.WithoutCancel(ctx))
			for got.Load() < int64(o.Messages) {
				b, err := g.Poll(pctx)
				if err != nil {
					if pctx.Err() != nil {
						return nil // another consumer read the last message
					}
					return fmt.Errorf("group poll: %w", err)
				}
				if err := b.Commit(pctx); err != nil && pctx.Err() == nil {
					return fmt.Errorf("commit: %w", err)
				}
				if count(&got, &bytes, b.Messages) >= int64(o.Messages) {
					cancel()
				}
			}
			return nil
		})
	} else {
		err = each(len(cs), func(i int) error {
			consumer := iggy.SingleConsumer(iggy.NumericID(uint32(i + 1)))
			for part := i; part < o.Partitions; part += len(cs) {
				var offset uint64
				for {
					r, err := cs[i].PollMessages(ctx, iggy.PollRequest{Consumer: consumer, Stream: stream, Topic: topic,
						Partition: iggy.Partition(uint32(part)), Strategy: iggy.AtOffset(offset), Count: uint32(o.Batch)})
					if err != nil {
						return fmt.Errorf("poll partition %d at %d: %w", part, offset, err)
					}
					if len(r.Messages) == 0 {
						break // the partition is read
					}
					count(&got, &bytes, r.Messages)
					offset = r.Messages[len(r.Messages)-1].Offset + 1
				}
			}
			return nil
		})
	}
	p := Phase{Messages: int(got.Load()), Bytes: bytes.Load(), Elapsed: time.Since(start), CPU: cputime.Process() - cpu0}
	if err == nil && p.Messages != o.Messages {
		err = fmt.Errorf("polled %d messages, sent %d", p.Messages, o.Messages)
	}
	return p, err
}

func count(got, bytes *atomic.Int64, msgs []iggy.Message) int64 {
	var n int64
	for i := range msgs {
		n += int64(len(msgs[i].Payload))
	}
	bytes.Add(n)
	return got.Add(int64(len(msgs)))
}

// each runs f(0) … f(n-1) at once and returns their errors joined.
func each(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
