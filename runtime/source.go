package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/transform"
	"go.opentelemetry.io/otel/trace"
)

// Retry backoff for a source's batch that failed to send or save, and
// for a sink's poll, commit and dead-letter send.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 10 * time.Second
	// drainTimeout bounds how long a stopping connector keeps trying to
	// deliver the batches it already polled (drainContext), and how long
	// Close and a cancelled Poll may take.
	drainTimeout = 10 * time.Second
)

// newRetry is the retry schedule: retryMin doubling to retryMax.
func newRetry() backoff.Backoff { return backoff.Backoff{Min: retryMin, Max: retryMax} }

// sourceRun is one run of a source pipeline.
type sourceRun struct {
	m         *managed
	cfg       *config.Connector
	src       connector.Source
	acker     connector.Acker // nil when the source does not implement it
	chain     transform.Chain
	outputs   []*output
	batchLen  int
	linger    time.Duration
	stateVer  state.Version
	stateSeen bool
	// prepareNS accumulates transform time between deliveries, for the
	// benchmark log event.
	prepareNS atomic.Int64
	// pollStuck is set when a Poll did not return after cancellation; the
	// source is then not closed (Close must not run beside a Poll).
	pollStuck bool
	// preparedMu guards prepared: what the poller's prepare made of each
	// batch besides its messages, for the deliverer.
	preparedMu sync.Mutex
	prepared   map[*connector.Batch]preparation
	times      map[*connector.Batch]polledTimes // while tracing (tracing.go)
	// client is the run's connection to Iggy; routes are the topics
	// messages were routed to (Message.Route), by stream and topic.
	client *iggy.Client
	routes map[[2]string]*sourceDLQ
	// sourceState is the source's own part of the last state loaded or
	// saved, saved again with the transforms' keyed state when a batch
	// changes that but brings no new source state.
	sourceState []byte
}

// preparation is what prepare made of a batch besides its messages.
type preparation struct {
	failed []transformFailure // the messages a transform failed
	tx     *transform.Tx      // the batch's changes to the transforms' keyed state
}

// transformFailure is a polled message a transform failed: it goes to the
// dead-letter topic of every stream of the source, as a message no stream
// can take (on_error decides, as for a message that does not convert).
type transformFailure struct {
	msg    connector.Message // as the source polled it
	schema connector.Schema  // the polled batch's
	index  int               // in the polled batch
	err    error
}

// output is one [[streams]] entry of a source.
type output struct {
	cfg      config.ProducerStream
	producer *iggy.Producer
	codec    codec.Codec
	// convs caches the conversion from each batch schema seen to the
	// stream's; only the delivering goroutine uses it.
	convs map[connector.Schema]codec.Convert
	// dlq receives the messages that cannot be sent to this stream; nil
	// with on_error = "stop".
	dlq *sourceDLQ
	// events checks the stream's declared event types; nil when it
	// declares none (eventtypes.go).
	events *eventCheck
}

// converter is the conversion of payloads of schema into the stream's.
func (o *output) converter(schema connector.Schema) (codec.Convert, error) {
	conv, ok := o.convs[schema]
	if !ok {
		from, err := codec.New(schema, codec.Options{})
		if err == nil {
			conv, err = codec.Converter(from, o.codec)
		}
		if err != nil {
			return nil, err
		}
		o.convs[schema] = conv
	}
	return conv, nil
}

func (m *managed) runSource(ctx context.Context, cfg *config.Connector) error {
	info, err := resolve(m.rt.opts.Registry, cfg)
	if err != nil {
		return terminal(fmt.Errorf("%s: %w", cfg.File, err))
	}
	chain, err := transform.Build(transformSpecs(cfg))
	if err != nil {
		return terminal(err)
	}
	defer chain.Close()
	codecs := make([]codec.Codec, len(cfg.Producers))
	for i, p := range cfg.Producers {
		if codecs[i], err = streamCodec(cfg, i, p.Schema, p.AvroSchemaJSON, p.AvroSchemaPath, p.StreamSchema); err != nil {
			return terminal(err)
		}
	}
	checks, err := newEventChecks(m.rt.cfg, cfg, info.Spec)
	if err != nil {
		return terminal(fmt.Errorf("%s: %w", cfg.File, err))
	}
	r := &sourceRun{m: m, cfg: cfg, acker: nil, chain: chain}
	if err := safely(func() (err error) {
		r.src, err = info.NewSource(connectorConfig(m, cfg))
		return err
	}); err != nil {
		return terminal(err)
	}
	r.acker, _ = r.src.(connector.Acker)

	client, err := m.rt.dial(ctx, "source "+m.key)
	if err != nil {
		return fmt.Errorf("connect to iggy: %w", err)
	}
	defer client.Close()
	r.client = client
	dlqs := map[[2]string]*sourceDLQ{}
	for i, p := range cfg.Producers {
		opts := append([]iggy.ProducerOption{iggy.WithBatchLength(int(p.BatchLength)), iggy.WithLinger(p.LingerTime)},
			keyPartitioning(&p)...) // key_field / key_template: the key picks the partition
		prod, err := iggy.NewProducer(client, iggy.NamedID(p.Stream), iggy.NamedID(p.Topic), opts...)
		if err != nil {
			return terminal(fmt.Errorf("producer for %s/%s: %w", p.Stream, p.Topic, err))
		}
		defer prod.Close(context.WithoutCancel(ctx))
		o := &output{cfg: p, producer: prod, codec: codecs[i], convs: map[connector.Schema]codec.Convert{},
			events: checks.stream(p.Stream, p.Topic, p.Schema, p.StreamSchema, codecs[i])}
		// Dead-letter topics are checked (or created) when first needed, not
		// here: a source that never dead-letters needs none.
		if stream, topic, ok := p.DeadLetterTarget(cfg.Key); ok {
			k := [2]string{stream, topic}
			if dlqs[k] == nil {
				dlqs[k] = &sourceDLQ{deadLetter: deadLetter{client: client, stream: stream, topic: topic, key: m.key, rt: m.rt}}
			}
			o.dlq = dlqs[k]
		}
		r.outputs = append(r.outputs, o)
		r.batchLen = max(r.batchLen, int(p.BatchLength))
		r.linger = max(r.linger, p.LingerTime)
	}

	var saved []byte
	switch st, err := m.rt.states.Load(ctx, m.key); {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return fmt.Errorf("load state: %w", err)
	default:
		r.stateVer, r.stateSeen = st.Version, true
		var keyed []byte
		if saved, keyed, err = splitState(st.Data); err == nil && keyed != nil {
			err = chain.UnmarshalState(keyed)
		}
		if err != nil {
			return terminal(fmt.Errorf("load state: %w", err))
		}
		r.sourceState = saved
	}
	if err := safely(func() error { return r.src.Open(ctx, saved) }); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		if r.pollStuck {
			return
		}
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
		defer cancel()
		if err := safely(func() error { return r.src.Close(closeCtx) }); err != nil {
			m.log.Warn("close failed", "error", err)
		}
	}()
	m.setStatus(StatusRunning)
	m.log.Info("source running", "streams", len(r.outputs))
	return r.run(ctx)
}

// run polls in one goroutine and delivers in this one; the channel between
// them holds one batch, so a slow Iggy slows the source. It returns only
// after the poller has returned, so Close never runs beside a Poll.
func (r *sourceRun) run(ctx context.Context) (err error) {
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan *connector.Batch, 1)
	pollErr := make(chan error, 1)
	go func() {
		defer close(polled)
		pollErr <- r.poll(pollCtx, polled)
	}()
	defer func() {
		stopPolling()
		if !r.waitPoller(polled) {
			r.pollStuck = true
			err = errors.Join(err, fmt.Errorf("Poll did not return within %s of being cancelled; the source is not closed", drainTimeout))
		}
	}()

	// On stop, batches already polled are still delivered, for a bounded time.
	deliverCtx, cancelDeliver := drainContext(ctx, drainTimeout)
	defer cancelDeliver()

	var carry *connector.Batch
	for {
		first := carry
		if first == nil {
			var ok bool
			if first, ok = <-polled; !ok {
				err := <-pollErr
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
		}
		var batches []*connector.Batch
		batches, carry = r.gather(first, polled)
		if err := r.deliver(deliverCtx, batches); err != nil {
			return err
		}
	}
}

// waitPoller drains the hand-over channel until the poller closes it, for
// at most drainTimeout; it reports whether the poller returned.
func (r *sourceRun) waitPoller(polled <-chan *connector.Batch) bool {
	timeout := time.NewTimer(drainTimeout)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-polled:
			if !ok {
				return true
			}
		case <-timeout.C:
			r.m.log.Error("source Poll ignores cancellation; not closing it", "waited", drainTimeout)
			return false
		}
	}
}

// poll calls the source, prepares each batch and hands it over.
func (r *sourceRun) poll(ctx context.Context, out chan<- *connector.Batch) error {
	for {
		var b *connector.Batch
		start := time.Now()
		err := safely(func() (err error) {
			b, err = r.src.Poll(ctx)
			return err
		})
		r.m.metrics.observe(stageFFI, start)
		if err != nil {
			return err
		}
		if b == nil || (len(b.Messages) == 0 && b.State == nil) {
			continue
		}
		r.m.metrics.produced.Add(float64(len(b.Messages)))
		pollStart := start
		start = time.Now()
		for retry := newRetry(); ; {
			err := r.prepare(ctx, b)
			if err == nil {
				break
			}
			if !connector.IsUnavailable(err) {
				return err
			}
			// A transform plugin that could not answer: the batch is
			// transformed again, with backoff.
			r.m.note(err)
			r.m.metrics.errors.Inc()
			if retry.Wait(ctx) != nil {
				return err
			}
		}
		r.m.metrics.observe(stagePrepare, start)
		r.prepareNS.Add(int64(time.Since(start)))
		if r.m.tr != nil {
			r.keepTimes(b, polledTimes{pollStart: pollStart, pollEnd: start, prepareEnd: time.Now()})
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// prepare applies the transforms (one call per batch for a batch
// transform such as wasm) and drops filtered messages. The batch's Schema
// becomes the schema after the transforms (a *_convert transform changes
// it). A message a transform fails is kept aside, as it was polled, for
// the dead-letter path (see failures).
func (r *sourceRun) prepare(ctx context.Context, b *connector.Batch) error {
	if b.Schema == "" {
		b.Schema = connector.SchemaJSON
	}
	if len(r.chain) == 0 {
		return nil
	}
	tx := r.chain.Begin()
	tctx := tx.Context(ctx)
	if b.ValidJSON && b.Schema == connector.SchemaJSON {
		tctx = transform.CheckedJSON(tctx) // the source checked every payload
	}
	res := r.chain.ApplyBatch(tctx, b.Messages, b.Schema)
	r.m.metrics.addCounters(r.chain.TakeCounters())
	for _, f := range res.Failed {
		if connector.IsUnavailable(f.Err) {
			// A transform plugin that could not answer: not the message's
			// fault. The run restarts and polls the batch again.
			tx.Rollback()
			return fmt.Errorf("message %d of a polled batch: %w (the batch is transformed again)", f.Index, f.Err)
		}
	}
	var p preparation
	p.tx = tx
	if len(res.Failed) > 0 {
		p.failed = make([]transformFailure, len(res.Failed))
		for k, f := range res.Failed {
			p.failed[k] = transformFailure{msg: b.Messages[f.Index], schema: b.Schema, index: f.Index, err: f.Err}
		}
	}
	if p.tx != nil || p.failed != nil {
		r.preparedMu.Lock()
		if r.prepared == nil {
			r.prepared = map[*connector.Batch]preparation{}
		}
		r.prepared[b] = p
		r.preparedMu.Unlock()
	}
	r.m.metrics.filtered.Add(float64(res.Filtered))
	b.Messages, b.Schema = res.Messages, res.Schema
	return nil
}

// preparation takes what prepare kept of a batch.
func (r *sourceRun) preparation(b *connector.Batch) preparation {
	r.preparedMu.Lock()
	defer r.preparedMu.Unlock()
	p := r.prepared[b]
	delete(r.prepared, b)
	return p
}

// gather merges the batches that arrive within the linger time, up to
// batch_length messages. Batches with messages merge only while they share
// a schema; a batch with another schema is returned as carry, to start the
// next delivery. Batches without messages (a new state only) merge with
// any.
func (r *sourceRun) gather(first *connector.Batch, polled <-chan *connector.Batch) (batches []*connector.Batch, carry *connector.Batch) {
	batches = []*connector.Batch{first}
	n := len(first.Messages)
	schema := schemaOf(first)
	if n >= r.batchLen || r.linger <= 0 {
		return batches, nil
	}
	timer := time.NewTimer(r.linger)
	defer timer.Stop()
	for n < r.batchLen {
		select {
		case b, ok := <-polled:
			if !ok {
				return batches, nil
			}
			if s := schemaOf(b); s != "" {
				if schema != "" && s != schema {
					return batches, b
				}
				schema = s
			}
			batches = append(batches, b)
			n += len(b.Messages)
		case <-timer.C:
			return batches, nil
		}
	}
	return batches, nil
}

// schemaOf is the schema of a batch's messages, or "" for a batch without.
func schemaOf(b *connector.Batch) connector.Schema {
	if len(b.Messages) == 0 {
		return ""
	}
	return b.Schema
}

// deliver sends the batches to every output (and the messages an output
// cannot take to its dead-letter topic; see encode), saves the last
// state, and acknowledges them. A failure that a retry can fix
// (connection, timeout, a retriable server code, a state-store conflict)
// is retried with backoff until ctx ends, with the connector's last error
// set; one that no retry can fix (a message rejected under on_error =
// "stop", a dead-letter topic that does not exist, a whole batch the
// server refuses) ends the run with that error, so the connector shows
// it and restarts from its saved state.
func (r *sourceRun) deliver(ctx context.Context, batches []*connector.Batch) error {
	if r.m.tr == nil {
		return r.deliverBatches(ctx, batches)
	}
	ctx, root := r.startBatch(ctx, batches)
	err := r.deliverBatches(ctx, batches)
	endSpan(root, err)
	return err
}

// deliverBatches is deliver, within the batch span in ctx while tracing.
func (r *sourceRun) deliverBatches(ctx context.Context, batches []*connector.Batch) error {
	start := time.Now()
	d := &delivery{}
	var st []byte
	var txs []*transform.Tx
	for _, b := range batches {
		d.starts = append(d.starts, len(d.msgs))
		if len(batches) == 1 {
			d.msgs = b.Messages // read only: no copy of the usual single batch
		} else {
			d.msgs = append(d.msgs, b.Messages...)
		}
		p := r.preparation(b)
		d.failed = append(d.failed, p.failed...)
		if p.tx != nil {
			txs = append(txs, p.tx)
		}
		if b.State != nil {
			st = b.State
		}
		if d.schema == "" {
			d.schema = schemaOf(b)
		}
	}
	e, err := r.encode(d)
	if err != nil {
		return err
	}
	if r.m.tr != nil {
		withTraceparent(ctx, e)
	}
	source := st
	if st, err = r.withKeyedState(st, txs); err != nil {
		return err
	}
	sent := make([]bool, len(r.outputs)+len(e.letters))
	saved := st == nil
	retry := newRetry()
	var sendTime, saveTime time.Duration
	for {
		t0 := time.Now()
		var span trace.Span
		if r.m.tr != nil {
			span = r.m.tr.child(ctx, spanSourceSend, trace.WithAttributes(attrMessages.Int(len(d.msgs))))
		}
		err := r.send(ctx, e, sent)
		endSpan(span, err)
		sendTime += time.Since(t0)
		if err == nil && !saved {
			t0 = time.Now()
			if r.m.tr != nil {
				span = r.m.tr.child(ctx, spanSourceStateSave)
			}
			if err = r.saveState(ctx, st); err == nil {
				saved = true
				if source != nil {
					r.sourceState = source
				}
			}
			endSpan(span, err)
			saveTime += time.Since(t0)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stopped before a batch was delivered (it will be polled again): %w", err)
		}
		r.m.metrics.errors.Inc()
		if !retriable(err) {
			return fmt.Errorf("a batch cannot be delivered: %w", err)
		}
		r.m.note(err)
		d := retry.Next()
		r.m.log.Warn("batch not delivered; retrying", "error", err, "in", d)
		for _, b := range batches {
			r.nack(ctx, b, err)
		}
		if backoff.Sleep(ctx, d) != nil {
			return fmt.Errorf("stopped before a batch was delivered (it will be polled again): %w", err)
		}
	}
	r.logDeadLetters(d, e)
	var span trace.Span
	if r.m.tr != nil && r.acker != nil {
		span = r.m.tr.child(ctx, spanSourceAck)
	}
	for _, b := range batches {
		r.ack(ctx, b)
	}
	endSpan(span, nil)
	r.m.metrics.observe(stageTotal, start)
	r.report(len(d.msgs), e, r.prepareNS.Swap(0), sendTime, saveTime, time.Since(start))
	return nil
}

// retriable reports whether sending or saving again may succeed: not for a
// state too large for the store, a permanentError, nor an Iggy error whose
// code says a retry cannot help (an empty or oversized message, a missing
// topic).
func retriable(err error) bool {
	var p permanentError
	if errors.Is(err, state.ErrTooLarge) || errors.As(err, &p) {
		return false
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return iggy.IsRetriable(err)
	}
	return true
}

// report logs a delivered batch: upstream's "benchmark" event per output
// with benchmark = true, and a line per batch at info with verbose = true
// (at debug otherwise).
func (r *sourceRun) report(n int, e *encoded, prepareNS int64, send, save, total time.Duration) {
	for i, o := range r.outputs {
		sent := len(e.outs[i])
		if r.cfg.Benchmark {
			r.m.log.Info("benchmark", "stream", o.cfg.Stream, "topic", o.cfg.Topic, "batch_size", n, "sent_count", sent,
				"decode_us", 0, "prepare_us", prepareNS/1000, "iggy_send_us", send.Microseconds(),
				"state_save_us", save.Microseconds(), "total_us", total.Microseconds())
		}
		level := slog.LevelDebug
		if r.cfg.Verbose {
			level = slog.LevelInfo
		}
		r.m.log.Log(context.Background(), level, "sent batch", "stream", o.cfg.Stream, "topic", o.cfg.Topic, "messages", sent)
	}
}

// send sends each output's messages to it, and each dead-letter topic's
// letters to it, unless already sent (sent: the outputs, then
// e.letters). The dead-letter topics are checked first, so a missing one
// stops the batch before any of it is sent.
func (r *sourceRun) send(ctx context.Context, e *encoded, sent []bool) error {
	if len(e.letters) == 0 && !slices.ContainsFunc(e.outs, func(out []iggy.Message) bool { return len(out) > 0 }) {
		return nil
	}
	if err := r.ensureLetters(ctx, e); err != nil {
		return err
	}
	start := time.Now()
	defer r.m.metrics.observe(stageIggySend, start)
	acks := make([]*iggy.Ack, len(r.outputs))
	for i, o := range r.outputs {
		if !sent[i] && len(e.outs[i]) > 0 {
			acks[i] = o.producer.Send(ctx, e.outs[i]...)
		}
	}
	var errs []error
	for k, l := range e.letters {
		if sent[len(r.outputs)+k] {
			continue
		}
		if err := l.dlq.sendMessages(ctx, l.msgs); err != nil {
			errs = append(errs, err)
			continue
		}
		sent[len(r.outputs)+k] = true
		if l.routed {
			r.m.metrics.sent.Add(float64(len(l.msgs)))
		}
	}
	for i, o := range r.outputs {
		if acks[i] == nil {
			continue
		}
		if err := o.producer.Flush(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := acks[i].Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("send to %s/%s: %w", o.cfg.Stream, o.cfg.Topic,
				r.m.rt.explainDenied(err, actSend, o.cfg.Stream, o.cfg.Topic)))
			continue
		}
		sent[i] = true
		r.m.metrics.sent.Add(float64(len(e.outs[i])))
	}
	return errors.Join(errs...)
}

func (r *sourceRun) saveState(ctx context.Context, data []byte) error {
	start := time.Now()
	defer r.m.metrics.observe(stageStateSave, start)
	v, err := r.m.rt.states.Save(ctx, r.m.key, data, r.stateVer)
	if fenced(err) {
		// A newer holder of the source's lease ([scale_out]) wrote its
		// state: this runtime must not go on with the source.
		return permanentError{fmt.Errorf("save state: %w: %w (another runtime holds the source now)", errLeaseLost, err)}
	}
	if errors.Is(err, state.ErrConflict) {
		// Someone else wrote the state (another runtime on an HTTP store);
		// ours is the newer position, so take the current version and retry.
		cur, lerr := r.m.rt.states.Load(ctx, r.m.key)
		if lerr == nil {
			r.stateVer = cur.Version
		} else if errors.Is(lerr, state.ErrNotFound) {
			r.stateVer = ""
		}
		return fmt.Errorf("save state: %w", err)
	}
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	r.stateVer = v
	return nil
}

func (r *sourceRun) ack(ctx context.Context, b *connector.Batch) {
	if r.acker == nil {
		return
	}
	if err := safely(func() error { return r.acker.Ack(ctx, b) }); err != nil {
		r.m.metrics.errors.Inc()
		r.m.log.Warn("source Ack failed (the batch is delivered)", "error", err)
	}
}

func (r *sourceRun) nack(ctx context.Context, b *connector.Batch, cause error) {
	if r.acker == nil {
		return
	}
	if err := safely(func() error { r.acker.Nack(ctx, b, cause); return nil }); err != nil {
		r.m.log.Warn("source Nack panicked", "error", err)
	}
}
