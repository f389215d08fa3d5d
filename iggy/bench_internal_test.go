package iggy

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Client-only costs, without the network and the broker: building a send
// request for a 1000-message batch, and decoding a 1000-message poll reply.

func clientBenchMessages(size int) []Message {
	msgs := make([]Message, 1000)
	payload := make([]byte, size)
	for i := range msgs {
		msgs[i].Payload = payload
	}
	return msgs
}

func BenchmarkClientEncode(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msgs := clientBenchMessages(size)
			s := sendState{stream: NumericID(1), topic: NumericID(1), p: ToPartition(0), msgs: msgs,
				frames: make([]wire.Message, len(msgs))}
			buf := make([]byte, wire.HeaderSize, 2<<20)
			b.SetBytes(int64(size * len(msgs)))
			b.ReportAllocs()
			for b.Loop() {
				for i := range msgs {
					msgs[i].ID, msgs[i].OriginTimestamp = [16]byte{}, time.Time{}
				}
				if err := prepareMessages(msgs); err != nil {
					b.Fatal(err)
				}
				toWire(s.frames, msgs)
				var err error
				if buf, err = s.encode(buf[:wire.HeaderSize]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func BenchmarkClientDecodePoll(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msgs := clientBenchMessages(size)
			if err := prepareMessages(msgs); err != nil {
				b.Fatal(err)
			}
			body := wire.AppendPollReplyHeader(nil, 0, 999, uint32(len(msgs)))
			frames := make([]wire.Message, len(msgs))
			toWire(frames, msgs)
			body, err := wire.AppendBatch(body, frames)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size * len(msgs)))
			b.ReportAllocs()
			for b.Loop() {
				var r PollReply
				if err := decodePollReply(body, &r); err != nil || len(r.Messages) != len(msgs) {
					b.Fatal(err, len(r.Messages))
				}
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
