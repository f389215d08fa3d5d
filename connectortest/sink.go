package connectortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SinkSuite says how to test one sink.
type SinkSuite struct {
	// New builds the sink as the runtime would, from its settings; the
	// suite opens and closes it.
	New func(t *testing.T) connector.Sink
	// Read returns the payloads the external system holds now, in the
	// order the sink wrote them (for a sink that cannot tell the order,
	// sorted; set Unordered).
	Read func(t *testing.T) []string
	// Unordered: Read's order says nothing; payloads are compared sorted.
	Unordered bool
	// Idempotent says that a batch written again (the same message ids and
	// offsets, as after a crash before the offset was committed) adds
	// nothing: the sink deduplicates.
	Idempotent bool
	// Schema is the schema of the batches the suite sends; default JSON.
	Schema connector.Schema
	// Poison, when set, is a payload the sink rejects on its own (a row a
	// table refuses): the suite checks that MessageErrors names exactly
	// that message and that its neighbours are written.
	Poison []byte
}

// Sink runs the conformance suite for a sink; each check is a subtest.
// The checks run in order on one external system: Read must see what
// earlier checks wrote.
func Sink(t *testing.T, s SinkSuite) {
	t.Helper()
	if s.New == nil || s.Read == nil {
		t.Fatal("connectortest.Sink: New and Read are required")
	}
	schema := s.Schema
	if schema == "" {
		schema = connector.SchemaJSON
	}
	snk := openSink(t, s)
	t.Cleanup(func() {
		if snk != nil {
			_ = snk.Close(context.Background())
		}
	})
	var written []string // everything written so far, in order
	offset := uint64(0)
	batch := func(n int) *connector.SinkBatch {
		b := &connector.SinkBatch{Stream: "conformance", Topic: "t", Partition: 0, Schema: schema}
		for range n {
			p := fmt.Sprintf(`{"n":%d,"text":"conformance message %d"}`, offset, offset)
			var id [16]byte
			id[0], id[15] = 0xfe, byte(offset)
			id[14] = byte(offset >> 8)
			b.Messages = append(b.Messages, connector.Message{ID: id, Payload: []byte(p), Stream: b.Stream, Topic: b.Topic,
				Offset: offset, Timestamp: time.Unix(1_700_000_000+int64(offset), 0).UTC()})
			offset++
		}
		return b
	}
	check := func(t *testing.T, what string) {
		t.Helper()
		got, want := s.Read(t), slices.Clone(written)
		if s.Unordered {
			slices.Sort(got)
			slices.Sort(want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the external system holds %q, want %q", what, got, want)
		}
	}
	consume := func(t *testing.T, b *connector.SinkBatch) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
		defer cancel()
		return snk.Consume(ctx, b)
	}

	t.Run("writes every message of a batch, in order", func(t *testing.T) {
		b := batch(7)
		if err := consume(t, b); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		written = append(written, payloads(b.Messages)...)
		check(t, "after one batch")
	})
	t.Run("a batch received twice is written once", func(t *testing.T) {
		b := batch(5)
		for i := range 2 {
			if err := consume(t, b); err != nil {
				t.Fatalf("Consume, time %d: %v", i+1, err)
			}
		}
		if !s.Idempotent {
			written = append(written, payloads(b.Messages)...)
			written = append(written, payloads(b.Messages)...)
			t.Skip("the sink does not claim to deduplicate: both copies are written (at-least-once)")
		}
		written = append(written, payloads(b.Messages)...)
		check(t, "after the same batch twice")
	})
	t.Run("MessageErrors name only messages of the batch", func(t *testing.T) {
		if s.Poison == nil {
			t.Skip("no payload the sink rejects on its own")
		}
		b := batch(3)
		b.Messages[1].Payload = s.Poison
		err := consume(t, b)
		var per connector.MessageErrors
		switch {
		case err == nil:
			t.Fatal("Consume wrote a batch holding a payload the sink rejects")
		case errors.As(err, &per):
			for i := range per {
				if i < 0 || i >= len(b.Messages) {
					t.Fatalf("MessageErrors names message %d of a batch of %d", i, len(b.Messages))
				}
			}
			if _, ok := per[1]; !ok || len(per) != 1 {
				t.Fatalf("MessageErrors %v: want exactly the poison message, 1", per)
			}
			written = append(written, string(b.Messages[0].Payload), string(b.Messages[2].Payload))
		default:
			// A whole-call error: the runtime isolates the poison message
			// by trying each message alone.
			for _, i := range []int{0, 2} {
				one := *b
				one.Messages = b.Messages[i : i+1]
				if err := consume(t, &one); err != nil {
					t.Fatalf("Consume of message %d alone, beside no poison: %v", i, err)
				}
				written = append(written, string(b.Messages[i].Payload))
			}
			one := *b
			one.Messages = b.Messages[1:2]
			if consume(t, &one) == nil {
				t.Fatal("Consume of the poison message alone succeeded")
			}
		}
		check(t, "after a batch with a rejected message")
	})
	t.Run("Consume returns when its context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		b := batch(3)
		go func() { done <- snk.Consume(ctx, b) }()
		select {
		case err := <-done:
			if err == nil {
				written = append(written, payloads(b.Messages)...) // done before it looked at ctx
			}
		case <-time.After(pollTimeout):
			t.Fatal("Consume with an ended context did not return within a minute")
		}
	})
	t.Run("Close", func(t *testing.T) {
		if err := snk.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		snk = nil
	})
}

func openSink(t *testing.T, s SinkSuite) connector.Sink {
	t.Helper()
	snk := s.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	if err := snk.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return snk
}
