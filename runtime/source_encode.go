package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// A source message that cannot be sent to one of its streams (a transform
// failed it, it does not convert to the stream's schema, or Iggy would
// refuse it) is rejected for that stream (for every stream, when a
// transform failed it), and the stream's on_error decides: "dead_letter" sends it to
// the stream's dead-letter topic, with the reason, and the rest of the
// batch on; "stop" sends nothing of the batch and ends the run with an
// error naming the message. Dead letters are sent with the batch, before
// the state is saved, and carry the id and origin timestamp the message
// has in the other streams, so a retry or a replay repeats them as it
// repeats the rest.

// delivery is the messages of the polled batches delivered together.
type delivery struct {
	msgs   []connector.Message
	schema connector.Schema
	starts []int // where each polled batch's messages start in msgs
	// failed are the messages a transform failed; in rejections they
	// follow msgs: index len(msgs)+k is failed[k].
	failed []transformFailure
}

// message is the j-th message of d: of msgs, then of failed.
func (d *delivery) message(j int) *connector.Message {
	if j >= len(d.msgs) {
		return &d.failed[j-len(d.msgs)].msg
	}
	return &d.msgs[j]
}

// sourceIndex is the index of the j-th message of d in the batch the
// source polled.
func (d *delivery) sourceIndex(j int) int {
	if j >= len(d.msgs) {
		return d.failed[j-len(d.msgs)].index
	}
	k, found := slices.BinarySearch(d.starts, j)
	if !found {
		k--
	}
	return j - d.starts[k]
}

// describe names msgs[j] for errors: its index in the polled batch and,
// when the source gave one, its position in the source.
func (d *delivery) describe(j int) string {
	s := fmt.Sprintf("message %d of the polled batch", d.sourceIndex(j))
	if p := position(d.message(j)); p != "" {
		s += " (" + p + ")"
	}
	return s
}

// position is the HeaderSourcePosition of m, or "".
func position(m *connector.Message) string {
	if v, ok := m.Header(HeaderSourcePosition); ok {
		return v.String()
	}
	return ""
}

// encoded is a delivery converted for every output once, with ids and
// origin timestamps fixed, so every retry sends the same messages: a
// message has the same id in every stream and in its dead letters.
type encoded struct {
	outs     [][]iggy.Message // per output, the messages it takes, in order
	letters  []*letters       // per dead-letter topic, what goes there
	rejected []rejection      // the dead-lettered messages, by index
}

// letters are a delivery's dead letters for one dead-letter topic.
type letters struct {
	dlq  *sourceDLQ
	msgs []iggy.Message
	// routed: the messages a transform routed to this topic (see route),
	// sent as they are; not dead letters.
	routed bool
}

// sourceDLQ is a dead-letter topic of a source, shared by the outputs
// that name it.
type sourceDLQ struct {
	deadLetter
	ready bool // the topic exists: checked (or created) before its first send
}

// rejection is a message that cannot be sent to one output.
type rejection struct {
	index int // in the delivery
	out   int // in sourceRun.outputs
	err   error
}

// stamp is the id and origin timestamp a message was first given.
type stamp struct {
	id     [16]byte
	origin time.Time
}

// encode converts d for every output. A rejected message goes, by its
// output's on_error, to that output's dead letters, or makes encode
// return the error that stops the run. A batch whose schema has no
// conversion to an output's is an error whatever on_error says: it is the
// configuration, not a message, that is wrong.
func (r *sourceRun) encode(d *delivery) (*encoded, error) {
	e := &encoded{outs: make([][]iggy.Message, len(r.outputs))}
	if len(d.msgs) == 0 && len(d.failed) == 0 {
		return e, nil
	}
	stamps := make([]stamp, len(d.msgs)+len(d.failed))
	var rejected []rejection
	for i := range r.outputs {
		for k, f := range d.failed {
			rejected = append(rejected, rejection{len(d.msgs) + k, i, f.err})
		}
	}
	for i, o := range r.outputs {
		if len(d.msgs) == 0 {
			break
		}
		conv, err := o.converter(d.schema)
		if err != nil {
			return nil, fmt.Errorf("a batch cannot be sent to stream %s/%s: %w", o.cfg.Stream, o.cfg.Topic, err)
		}
		out, rej, err := o.encode(i, d.msgs, conv, stamps)
		if err != nil {
			return nil, fmt.Errorf("a batch cannot be sent to stream %s/%s: %w", o.cfg.Stream, o.cfg.Topic, err)
		}
		e.outs[i], rejected = out, append(rejected, rej...)
		rej, err = r.route(e, i, d.msgs, conv, stamps)
		if err != nil {
			return nil, err
		}
		rejected = append(rejected, rej...)
	}
	if len(rejected) == 0 {
		return e, nil
	}
	slices.SortFunc(rejected, func(a, b rejection) int { return cmp.Or(a.index-b.index, a.out-b.out) })
	for _, rj := range rejected {
		if r.outputs[rj.out].dlq == nil {
			return nil, r.stopped(d, rj)
		}
	}
	now := dlqTimestamp()
	for _, rj := range rejected {
		dl, err := r.deadLetterOf(d, rj, stamps[rj.index], now)
		if err != nil {
			return nil, err
		}
		dlq := r.outputs[rj.out].dlq
		k := slices.IndexFunc(e.letters, func(l *letters) bool { return l.dlq == dlq })
		if k < 0 {
			k = len(e.letters)
			e.letters = append(e.letters, &letters{dlq: dlq})
		}
		e.letters[k].msgs = append(e.letters[k].msgs, dl)
	}
	for _, l := range e.letters {
		// Gives the letters of messages no stream took their ids now, once.
		if err := iggy.PrepareMessages(l.msgs); err != nil {
			return nil, fmt.Errorf("dead letters for %s/%s: %w", l.dlq.stream, l.dlq.topic, err)
		}
	}
	e.rejected = rejected
	return e, nil
}

// encode converts msgs for o, the i-th output, taking the ids and origin
// timestamps stamps holds and recording those it gives out. It returns the
// messages o takes and the rejections.
func (o *output) encode(i int, msgs []connector.Message, conv codec.Convert, stamps []stamp) ([]iggy.Message, []rejection, error) {
	out := make([]iggy.Message, 0, len(msgs))
	from := make([]int, 0, len(msgs)) // the index in msgs of each of out
	var rejected []rejection
	for j := range msgs {
		if msgs[j].Route != "" {
			continue // sent to its route's topic (routes)
		}
		m, err := toIggy(&msgs[j], conv)
		if err == nil {
			err = applyKey(&o.cfg.StreamKey, &m) // source_key.go
		}
		if err == nil && len(m.Payload) == 0 {
			keyedEmptyIsDeletion(&m)
		}
		if err == nil {
			err = o.events.check(m.Headers, m.Payload)
		}
		if err != nil {
			rejected = append(rejected, rejection{j, i, err})
			continue
		}
		if st := stamps[j]; st.id != ([16]byte{}) {
			m.ID, m.OriginTimestamp = st.id, st.origin
		}
		out, from = append(out, m), append(from, j)
	}
	if len(out) == 0 {
		return out, rejected, nil
	}
	if iggy.PrepareMessages(out) != nil {
		// Some message is one Iggy refuses: find which, one by one.
		kept, keptFrom := out[:0], from[:0]
		for k := range out {
			if err := refused(out[k]); err != nil {
				rejected = append(rejected, rejection{from[k], i, err})
				continue
			}
			kept, keptFrom = append(kept, out[k]), append(keptFrom, from[k])
		}
		out, from = kept, keptFrom
		if len(out) == 0 {
			return out, rejected, nil
		}
		if err := iggy.PrepareMessages(out); err != nil {
			return nil, nil, err
		}
	}
	for k, j := range from {
		if stamps[j].id == ([16]byte{}) {
			stamps[j] = stamp{out[k].ID, out[k].OriginTimestamp}
		}
	}
	return out, rejected, nil
}

// toIggy converts one message with conv. Its HeaderSourcePosition is left
// out: it is for dead letters only.
func toIggy(m *connector.Message, conv codec.Convert) (iggy.Message, error) {
	payload, err := conv(nil, m.Payload)
	if err != nil {
		return iggy.Message{}, err
	}
	return iggy.Message{ID: m.ID, Payload: payload, Headers: withoutPosition(m.Headers), OriginTimestamp: m.OriginTimestamp}, nil
}

// withoutPosition is h without its HeaderSourcePosition; h itself when it
// has none.
func withoutPosition(h []connector.Header) []connector.Header {
	for i, e := range h {
		if e.Key.Is(HeaderSourcePosition) {
			return append(h[:i:i], h[i+1:]...)
		}
	}
	return h
}

// keyedEmptyIsDeletion makes a keyed message with an empty payload (a
// Kafka tombstone, say) the deletion marker of its key, by Ferry's key
// convention (docs/keys.md): the payload iggy.DeletedPayload and
// iggy.DeletedHeader = true. Iggy refuses empty payloads, so an unkeyed
// one is dead-lettered instead (deadLetterOf).
func keyedEmptyIsDeletion(m *iggy.Message) {
	if _, keyed := m.Key(); !keyed {
		return
	}
	m.Payload = []byte(iggy.DeletedPayload)
	m.Headers = header.Set(m.Headers, iggy.DeletedHeader, header.BoolValue(true))
}

// refused says why Iggy would refuse m (iggy.PrepareMessages's checks of
// one message: an empty or oversized payload, bad or oversized headers),
// or nil. m is not changed.
func refused(m iggy.Message) error {
	if err := iggy.PrepareMessages([]iggy.Message{m}); err != nil {
		return reasonError{err}
	}
	return nil
}

// reasonError is a PrepareMessages error of one message without its
// "message 0: " prefix.
type reasonError struct{ error }

func (e reasonError) Error() string { return strings.TrimPrefix(e.error.Error(), "message 0: ") }

func (e reasonError) Unwrap() error { return e.error }

// deadLetterOf is rj's dead letter, with st's id and origin timestamp when
// another stream took the message. A dead letter keeps the original
// payload; when Iggy refuses that too (empty, or over its size limit), the
// message cannot be dead-lettered, and the error says so.
func (r *sourceRun) deadLetterOf(d *delivery, rj rejection, st stamp, now connector.Header) (iggy.Message, error) {
	o := r.outputs[rj.out]
	m := *d.message(rj.index)
	schema := d.schema
	if rj.index >= len(d.msgs) {
		schema = d.failed[rj.index-len(d.msgs)].schema
	}
	ours := []connector.Header{
		connector.StringHeader(HeaderDLQStream, o.cfg.Stream),
		connector.StringHeader(HeaderDLQTopic, o.cfg.Topic),
		header.New(HeaderDLQSourceIndex, header.Uint32Value(uint32(d.sourceIndex(rj.index)))),
		connector.StringHeader(HeaderDLQSchema, string(schema)),
		dlqError(rj.err), o.dlq.connectorHeader(), now,
	}
	if len(m.Payload) == 0 {
		// Iggy stores no empty payload, not even as a dead letter: the
		// letter says so and carries the JSON null.
		m.Payload = []byte(iggy.DeletedPayload)
		ours = append(ours, header.New(HeaderDLQEmptyPayload, header.BoolValue(true)))
	}
	dl, err := letter(&m, ours)
	if err == nil {
		err = refused(dl)
	}
	if err != nil {
		return iggy.Message{}, fmt.Errorf("%s cannot be sent to stream %s/%s: %w; nor can it be dead-lettered (a dead letter keeps the original payload): %w",
			d.describe(rj.index), o.cfg.Stream, o.cfg.Topic, rj.err, err)
	}
	if st.id != ([16]byte{}) {
		dl.ID, dl.OriginTimestamp = st.id, st.origin
	}
	return dl, nil
}

// stopped is the error of a message that on_error = "stop" does not let
// through.
func (r *sourceRun) stopped(d *delivery, rj rejection) error {
	o := r.outputs[rj.out]
	return fmt.Errorf("%s cannot be sent to stream %s/%s: %w; on_error = \"stop\", so nothing of the batch is sent "+
		"and the source restarts from its saved state: fix the message, or set on_error = \"dead_letter\" "+
		"to send such messages to a dead-letter topic and go on", d.describe(rj.index), o.cfg.Stream, o.cfg.Topic, rj.err)
}

// deadLetterLogs is how many dead letters of one delivery are logged one
// by one; the rest are counted in one line.
const deadLetterLogs = 5

// logDeadLetters counts and logs a delivered batch's dead letters.
func (r *sourceRun) logDeadLetters(d *delivery, e *encoded) {
	if len(e.rejected) == 0 {
		return
	}
	r.m.metrics.dead.Add(float64(len(e.rejected)))
	for n, rj := range e.rejected {
		if n == deadLetterLogs {
			r.m.log.Warn("more messages of the batch sent to dead-letter topics", "count", len(e.rejected)-n)
			return
		}
		o := r.outputs[rj.out]
		args := []any{"index", d.sourceIndex(rj.index)}
		if p := position(d.message(rj.index)); p != "" {
			args = append(args, "position", p)
		}
		r.m.log.Warn("message sent to the dead-letter topic", append(args, "stream", o.cfg.Stream, "topic", o.cfg.Topic,
			"error", rj.err, "dead_letter", o.dlq.stream+"/"+o.dlq.topic)...)
	}
}

// permanentError marks a delivery failure that retrying cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// ensureLetters makes sure the dead-letter topics of e exist before
// anything of the batch is sent (creating them on the embedded broker or
// with create_missing), once per run. A topic that does not exist and may
// not be created is a permanent failure.
func (r *sourceRun) ensureLetters(ctx context.Context, e *encoded) error {
	create := r.m.rt.cfg.Iggy.Embedded() || r.m.rt.cfg.Iggy.CreateMissing
	for _, l := range e.letters {
		if l.dlq.ready {
			continue
		}
		if err := r.m.rt.ensureTopic(ctx, l.dlq.stream, l.dlq.topic, create); err != nil {
			if !errors.Is(err, iggy.ErrConnection) {
				err = permanentError{err}
			}
			return fmt.Errorf("%s: %w", l.dlq.label(), err)
		}
		l.dlq.ready = true
	}
	return nil
}

// route adds the messages of msgs a transform routed (Message.Route) to
// e, for the i-th output: each goes, converted as the output's messages
// are, to the topic it names in the output's stream (created when missing,
// as dead-letter topics are). A route that is not a topic name is a
// rejection. The ids follow stamps, as the output's messages do.
func (r *sourceRun) route(e *encoded, i int, msgs []connector.Message, conv codec.Convert, stamps []stamp) ([]rejection, error) {
	o := r.outputs[i]
	var rejected []rejection
	for j := range msgs {
		topic := msgs[j].Route
		if topic == "" {
			continue
		}
		if len(topic) > 255 {
			rejected = append(rejected, rejection{j, i, fmt.Errorf("routed to a topic name of %d bytes (at most 255)", len(topic))})
			continue
		}
		m, err := toIggy(&msgs[j], conv)
		if err == nil {
			err = applyKey(&o.cfg.StreamKey, &m) // source_key.go
		}
		if err == nil && len(m.Payload) == 0 {
			keyedEmptyIsDeletion(&m)
		}
		if err == nil {
			err = refused(m)
		}
		if err != nil {
			rejected = append(rejected, rejection{j, i, err})
			continue
		}
		if st := stamps[j]; st.id != ([16]byte{}) {
			m.ID, m.OriginTimestamp = st.id, st.origin
		}
		target := r.routeTarget(o.cfg.Stream, topic)
		k := slices.IndexFunc(e.letters, func(l *letters) bool { return l.dlq == target })
		if k < 0 {
			k = len(e.letters)
			e.letters = append(e.letters, &letters{dlq: target, routed: true})
		}
		l := e.letters[k]
		l.msgs = append(l.msgs, m)
		if err := iggy.PrepareMessages(l.msgs[len(l.msgs)-1:]); err != nil {
			return nil, fmt.Errorf("routed to %s/%s: %w", o.cfg.Stream, topic, err)
		}
		if stamps[j].id == ([16]byte{}) {
			stamps[j] = stamp{l.msgs[len(l.msgs)-1].ID, l.msgs[len(l.msgs)-1].OriginTimestamp}
		}
	}
	return rejected, nil
}

// routeTarget is the topic stream/topic that routed messages go to.
func (r *sourceRun) routeTarget(stream, topic string) *sourceDLQ {
	k := [2]string{stream, topic}
	if r.routes == nil {
		r.routes = map[[2]string]*sourceDLQ{}
	}
	t := r.routes[k]
	if t == nil {
		t = &sourceDLQ{deadLetter: deadLetter{client: r.client, stream: stream, topic: topic, key: r.m.key, rt: r.m.rt, what: "routed topic"}}
		r.routes[k] = t
	}
	return t
}
