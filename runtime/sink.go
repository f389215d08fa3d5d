package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/ferryhq/ferry/transform"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// sinkRun is one run of a sink pipeline.
type sinkRun struct {
	m     *managed
	cfg   *config.Connector
	sink  connector.Sink
	chain transform.Chain
	keyed *sinkKeyed // the transforms' keyed state; nil when they keep none
	// events are the checks of declared event types; nil when the sink's
	// streams declare none (eventtypes.go).
	events *eventChecks
}

func (m *managed) runSink(ctx context.Context, cfg *config.Connector) error {
	info, err := resolve(m.rt.opts.Registry, cfg)
	if err != nil {
		return terminal(fmt.Errorf("%s: %w", cfg.File, err))
	}
	chain, err := transform.Build(transformSpecs(cfg))
	if err != nil {
		return terminal(err)
	}
	defer chain.Close()
	codecs := make([]codec.Codec, len(cfg.Consumers))
	for i, cs := range cfg.Consumers {
		if codecs[i], err = streamCodec(cfg, i, cs.Schema, cs.AvroSchemaJSON, cs.AvroSchemaPath, cs.StreamSchema); err != nil {
			return terminal(err)
		}
	}
	checks, err := newEventChecks(m.rt.cfg, cfg, info.Spec)
	if err != nil {
		return terminal(fmt.Errorf("%s: %w", cfg.File, err))
	}
	r := &sinkRun{m: m, cfg: cfg, chain: chain, events: checks}
	if r.keyed, err = loadSinkKeyed(ctx, m.rt.states, m.key, chain); err != nil {
		return terminal(err)
	}
	if err := safely(func() (err error) {
		r.sink, err = info.NewSink(connectorConfig(m, cfg))
		return err
	}); err != nil {
		return terminal(err)
	}
	m.setActivity(r.sink)
	defer m.setActivity(nil)
	m.setViewer(r.sink)
	defer m.setViewer(nil)
	for _, cs := range cfg.Consumers {
		if err := r.checkLanes(cs); err != nil {
			return terminal(fmt.Errorf("%s: %w", cfg.File, err))
		}
	}
	if err := safely(func() error { return r.sink.Open(ctx) }); err != nil {
		if connector.IsUnavailable(err) {
			return fmt.Errorf("open: destination unavailable: %w", err)
		}
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
		defer cancel()
		if err := safely(func() error { return r.sink.Close(closeCtx) }); err != nil {
			m.log.Warn("close failed", "error", err)
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg, joined sync.WaitGroup
	var once sync.Once
	var firstErr error
	for i, cs := range cfg.Consumers {
		for _, topic := range cs.Topics {
			wg.Add(1)
			joined.Add(1)
			go func() {
				defer wg.Done()
				if err := r.consume(runCtx, cs, codecs[i], topic, joined.Done); err != nil {
					once.Do(func() { firstErr = err })
					cancel(err)
				}
			}()
		}
	}
	// Running once every member has joined its group (and settled
	// start_from): a message sent after that is the sink's to read.
	joinedAll := make(chan struct{})
	go func() { joined.Wait(); close(joinedAll) }()
	select {
	case <-joinedAll:
	case <-runCtx.Done():
	}
	m.setStatus(StatusRunning)
	m.log.Info("sink running")
	wg.Wait()
	return firstErr
}

// member is one consumer-group member: one stream and topic of a sink.
type member struct {
	r      *sinkRun
	cs     config.ConsumerStream
	topic  string
	gc     *iggy.GroupConsumer
	client *iggy.Client
	dlq    *deadLetter
	ffi    time.Duration // time inside Consume for the batch being handled
	codec  codec.Codec   // the stream's schema
	events *eventCheck   // the stream's declared event types; nil for none
}

// consume polls one stream/topic until ctx ends or delivery fails for good.
func (r *sinkRun) consume(ctx context.Context, cs config.ConsumerStream, c codec.Codec, topic string, joined func()) error {
	m := r.m
	var joinOnce sync.Once
	defer joinOnce.Do(joined)
	client, err := m.rt.dial(ctx, fmt.Sprintf("sink %s %s/%s", m.key, cs.Stream, topic))
	if err != nil {
		return fmt.Errorf("connect to iggy: %w", err)
	}
	defer client.Close()
	opts := []iggy.ConsumerOption{iggy.WithCreateGroup()}
	if cs.BatchLength > 0 {
		opts = append(opts, iggy.WithPollCount(cs.BatchLength))
	}
	if cs.PollInterval > 0 {
		opts = append(opts, iggy.WithPollInterval(cs.PollInterval))
	}
	opts = append(opts, m.rt.wakeOption(cs.Stream, topic))
	if sf, _ := config.ParseStartFrom(cs.StartFrom); sf.Now {
		opts = append(opts, iggy.WithStartAtEnd())
	} else if sf.Offset > 0 {
		opts = append(opts, iggy.WithStartAt(sf.Offset))
	}
	gc, err := iggy.NewGroupConsumer(client, iggy.NamedID(cs.Stream), iggy.NamedID(topic), iggy.NamedID(cs.ConsumerGroup), opts...)
	if err != nil {
		return terminal(fmt.Errorf("consumer for %s/%s: %w", cs.Stream, topic, m.rt.explainDenied(err, actConsume, cs.Stream, topic)))
	}
	defer gc.Close(context.WithoutCancel(ctx))
	if err := gc.Join(ctx); err != nil && ctx.Err() == nil {
		// Poll joins again and says what is wrong if it still is.
		m.log.Debug("join failed; the first poll tries again", "stream", cs.Stream, "topic", topic, "error", err)
	}
	joinOnce.Do(joined)
	mem := &member{r: r, cs: cs, topic: topic, gc: gc, client: client, codec: c,
		events: r.events.stream(cs.Stream, topic, cs.Schema, cs.StreamSchema, c)}
	if cs.OnError == config.PolicyDeadLetter {
		mem.dlq = &deadLetter{client: client, stream: cs.DeadLetterStream, topic: cs.DeadLetterTopic, key: m.key, rt: m.rt}
	}

	// In-flight batches are finished after a stop, for a bounded time.
	workCtx, cancelWork := drainContext(ctx, drainTimeout)
	defer cancelWork()
	if cs.Ordering == config.OrderKey || cs.Ordering == config.OrderNone {
		return newLaneSet(mem).run(ctx, workCtx)
	}

	retry := newRetry()
	for {
		var pollStart time.Time
		if m.tr != nil {
			pollStart = time.Now()
		}
		b, err := gc.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !iggy.IsRetriable(err) && !errors.Is(err, iggy.ErrConnection) {
				return fmt.Errorf("poll %s/%s: %w", cs.Stream, topic, m.rt.explainDenied(err, actConsume, cs.Stream, topic))
			}
			m.metrics.errors.Inc()
			d := retry.Next()
			m.log.Warn("poll failed; retrying", "stream", cs.Stream, "topic", topic, "error", err, "in", d)
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		retry.Reset()
		m.metrics.consumed.Add(float64(len(b.Messages)))
		if err := mem.handle(workCtx, b, pollStart); err != nil {
			if workCtx.Err() != nil {
				return nil // stopped mid-batch: not committed, so it is read again
			}
			return err
		}
	}
}

// handle decodes, transforms and writes one polled batch, dead-letters
// what cannot be written (by policy), and commits the offset.
func (mem *member) handle(ctx context.Context, b *iggy.Batch, pollStart time.Time) error {
	if mem.r.m.tr == nil {
		return mem.handleBatch(ctx, b)
	}
	ctx, root := mem.startBatch(ctx, b, pollStart, time.Now())
	err := mem.handleBatch(ctx, b)
	endSpan(root, err)
	return err
}

// handleBatch is handle, within the batch span in ctx while tracing.
func (mem *member) handleBatch(ctx context.Context, b *iggy.Batch) error {
	m := mem.r.m
	start := time.Now()
	mem.ffi = 0
	tx, batch, failed, err := mem.prepareRetrying(ctx, b)
	if err != nil {
		return err
	}
	defer tx.Rollback() // when not committed below
	m.metrics.observe(stagePrepare, start)
	prepared := time.Since(start)

	if len(batch.Messages) > 0 {
		unwritten, down := mem.write(ctx, batch)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if down != nil {
			// The destination is unavailable, or nothing of the batch
			// could be written: the sink (or what it writes to) is
			// failing, not these messages. Restart with backoff (1 s
			// doubling to 1 min, see supervise) instead of dead-lettering
			// or stopping for good; the batch is read again.
			return fmt.Errorf("%s/%s partition %d from offset %d: %w (offset not committed; the sink restarts with backoff)",
				mem.cs.Stream, mem.topic, b.Partition, b.Messages[0].Offset, down)
		}
		failed = append(failed, unwritten...)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		if mem.dlq == nil {
			f := failed[0]
			return terminal(fmt.Errorf("%s/%s partition %d offset %d: %v (on_error = \"stop\"; %d message(s) of the batch failed, offset not committed)",
				mem.cs.Stream, mem.topic, b.Partition, f.msg.Offset, f.err, len(failed)))
		}
		if err := mem.deadLetter(ctx, failed); err != nil {
			return err
		}
	}
	var span trace.Span
	if m.tr != nil {
		span = m.tr.child(ctx, spanSinkCommit, trace.WithAttributes(attrPartition.Int64(int64(b.Partition)),
			attribute.Int64("iggy.offset", int64(b.LastOffset()))))
	}
	err = mem.r.keyed.commit(ctx, tx, mem.cs.Stream, mem.topic, b.Partition, b.LastOffset())
	if err == nil {
		err = mem.commit(ctx, b)
	}
	endSpan(span, err)
	if err != nil {
		return err
	}
	m.metrics.observe(stageTotal, start)
	mem.report(b, len(batch.Messages), prepared, time.Since(start))
	return nil
}

// prepareRetrying prepares b in a keyed-state transaction of its own,
// again and again with backoff while a transform cannot answer (a
// transform plugin whose process died: not the messages' fault, so they
// are neither dead-lettered nor committed), until ctx ends.
func (mem *member) prepareRetrying(ctx context.Context, b *iggy.Batch) (*transform.Tx, *connector.SinkBatch, []failure, error) {
	retry := newRetry()
	for {
		tx := mem.r.chain.Begin()
		batch, failed := mem.prepare(ctx, tx, b)
		i := slices.IndexFunc(failed, func(f failure) bool { return connector.IsUnavailable(f.err) })
		if i < 0 {
			return tx, batch, failed, nil
		}
		tx.Rollback()
		err := fmt.Errorf("%s/%s partition %d offset %d: %w (the batch is transformed again)",
			mem.cs.Stream, mem.topic, b.Partition, failed[i].msg.Offset, failed[i].err)
		mem.r.m.note(err)
		mem.r.m.metrics.errors.Inc()
		if werr := retry.Wait(ctx); werr != nil {
			return nil, nil, nil, err
		}
	}
}

// report logs a handled batch: upstream's "benchmark" event with
// benchmark = true, and a line per batch at info with verbose = true (at
// debug otherwise).
func (mem *member) report(b *iggy.Batch, processed int, prepare, total time.Duration) {
	log, cfg := mem.r.m.log, mem.r.cfg
	if cfg.Benchmark {
		log.Info("benchmark", "stream", mem.cs.Stream, "topic", mem.topic, "partition_id", b.Partition,
			"current_offset", b.CurrentOffset, "batch_size", len(b.Messages), "processed_count", processed,
			"prepare_us", prepare.Microseconds(), "ffi_us", mem.ffi.Microseconds(), "total_us", total.Microseconds())
	}
	level := slog.LevelDebug
	if cfg.Verbose {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "consumed batch", "stream", mem.cs.Stream, "topic", mem.topic,
		"partition", b.Partition, "messages", len(b.Messages), "last_offset", b.LastOffset())
}

// failure is one message that could not be decoded, transformed or written.
type failure struct {
	msg connector.Message
	err error
}

// permanent reports whether retrying cannot help: a decode or transform
// failure, or a sink error marked connector.Permanent.
func (f failure) permanent() bool {
	var d decodeError
	return errors.As(f.err, &d) || connector.IsPermanent(f.err)
}

// decodeError marks a message that failed to decode or transform.
type decodeError struct{ error }

func (e decodeError) Unwrap() error { return e.error }

// prepare turns a polled batch into the sink's batch: decoding checks each
// payload with the stream's codec (and, as upstream's decoders do, turns
// avro, proto and flatbuffer payloads that have a schema into JSON), then
// the transforms run, in tx. The batch's Schema is the schema after both.
// Messages that fail either are returned as failures, with the payload as
// it was read.
func (mem *member) prepare(ctx context.Context, tx *transform.Tx, b *iggy.Batch) (*connector.SinkBatch, []failure) {
	m := mem.r.m
	schema := connector.Schema(mem.cs.Schema)
	toJSON := mem.codec.Mapped() && schema != connector.SchemaJSON && schema != connector.SchemaText && schema != ""
	if toJSON {
		schema = connector.SchemaJSON
	}
	out := &connector.SinkBatch{Stream: mem.cs.Stream, Topic: mem.topic, Partition: b.Partition, Schema: schema,
		Messages: make([]connector.Message, 0, len(b.Messages))}
	var failed []failure
	var raw [][]byte // the payloads as read, when decoding replaced them
	events := mem.events
	if toJSON {
		events = events.decoded() // the check of payloads already turned into JSON
	}
	decodeStart := time.Now()
	for i := range b.Messages {
		cm, err := fromIggy(&b.Messages[i], mem.cs.Stream, mem.topic, b.Partition)
		if err == nil {
			if toJSON {
				cm.Payload, err = mem.codec.ToJSON(nil, cm.Payload)
			} else {
				err = mem.codec.Validate(cm.Payload)
			}
		}
		if err != nil {
			cm.Payload = b.Messages[i].Payload
			failed = append(failed, failure{cm, decodeError{fmt.Errorf("decode: %w", err)}})
			continue
		}
		if err := events.check(cm.Headers, cm.Payload); err != nil {
			cm.Payload = b.Messages[i].Payload
			failed = append(failed, failure{cm, decodeError{err}})
			continue
		}
		out.Messages = append(out.Messages, cm)
		if toJSON {
			raw = append(raw, b.Messages[i].Payload)
		}
	}
	m.metrics.observe(stageDecode, decodeStart)
	if m.tr != nil {
		m.tr.timed(ctx, spanSinkDecode, decodeStart, time.Now(), attrMessages.Int(len(b.Messages)),
			attribute.Int("ferry.failed_count", len(failed)))
	}
	if len(mem.r.chain) == 0 {
		return out, failed
	}
	if m.tr != nil {
		span := m.tr.child(ctx, spanSinkTransforms, trace.WithAttributes(attrMessages.Int(len(out.Messages))))
		defer endSpan(span, nil)
	}
	if toJSON || mem.codec.Schema() == connector.SchemaJSON {
		ctx = transform.CheckedJSON(ctx) // decoding checked (or made) every JSON payload
	}
	res := mem.applyChain(ctx, tx, out.Messages, schema)
	m.metrics.addCounters(mem.r.chain.TakeCounters())
	for _, f := range res.Failed {
		original := out.Messages[f.Index]
		if toJSON {
			original.Payload = raw[f.Index]
		}
		failed = append(failed, failure{original, decodeError{f.Err}})
	}
	m.metrics.filtered.Add(float64(res.Filtered))
	kept := res.Messages[:0]
	for _, msg := range res.Messages {
		if msg.Route != "" {
			failed = append(failed, failure{msg, decodeError{fmt.Errorf("a transform routed the message to topic %q: routing is for sources (a sink's messages are in Iggy already)", msg.Route)}})
			continue
		}
		kept = append(kept, msg)
	}
	out.Messages, out.Schema = kept, res.Schema
	return out, failed
}

// consume calls the sink's Consume under recover and times it.
func (mem *member) consume(ctx context.Context, b *connector.SinkBatch) error {
	start := time.Now()
	defer func() {
		mem.r.m.metrics.observe(stageFFI, start)
		mem.ffi += time.Since(start)
	}()
	if tr := mem.r.m.tr; tr != nil {
		span := tr.child(ctx, spanSinkConsume, trace.WithAttributes(attrMessages.Int(len(b.Messages))))
		err := safely(func() error { return mem.r.sink.Consume(ctx, b) })
		endSpan(span, err)
		return err
	}
	return safely(func() error { return mem.r.sink.Consume(ctx, b) })
}

// commit stores the batch's last offset, retrying until it is stored or
// ctx ends; an uncommitted batch is delivered again (at-least-once).
func (mem *member) commit(ctx context.Context, b *iggy.Batch) error {
	retry := newRetry()
	for {
		err := b.Commit(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		mem.r.m.metrics.errors.Inc()
		mem.r.m.log.Warn("offset commit failed; retrying", "partition", b.Partition, "offset", b.LastOffset(), "error", err)
		if err := retry.Wait(ctx); err != nil {
			return err
		}
	}
}

// deadLetter sends failures to the dead-letter topic, retrying until they
// are stored: the offset is committed only after that.
func (mem *member) deadLetter(ctx context.Context, failed []failure) error {
	retry := newRetry()
	for {
		err := mem.dlq.send(ctx, failed)
		if err == nil {
			mem.r.m.metrics.dead.Add(float64(len(failed)))
			for _, f := range failed {
				mem.r.m.log.Warn("message sent to the dead-letter topic", "stream", f.msg.Stream, "topic", f.msg.Topic,
					"partition", f.msg.Partition, "offset", f.msg.Offset, "error", f.err,
					"dead_letter", mem.dlq.stream+"/"+mem.dlq.topic)
			}
			// The connector runs on, but its last error says why messages
			// went to the dead-letter topic.
			last := failed[len(failed)-1]
			mem.r.m.note(fmt.Errorf("%s/%s partition %d offset %d sent to the dead-letter topic %s/%s: %w",
				last.msg.Stream, last.msg.Topic, last.msg.Partition, last.msg.Offset, mem.dlq.stream, mem.dlq.topic, last.err))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		mem.r.m.metrics.errors.Inc()
		d := retry.Next()
		mem.r.m.log.Error("dead-letter send failed; retrying", "error", err, "in", d)
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}
