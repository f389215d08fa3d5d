package runtime

// The runtime's own events (package sysevents): connector status changes
// and dead-letterings, published as CloudEvents JSON to the system stream
// ferry.events (topics connector.status_changed and
// message.dead_lettered) of whatever broker the runtime uses: with ferry
// run's embedded broker, in process through Broker.PublishEvent (the
// broker's bounded queue, appended with its own events: no connection,
// and never mixed with the connectors' sends, which tests and fault
// injection watch); with any other server, through an Iggy client of its
// own, as follows.
//
// An event point never waits: it offers the event to a bounded queue
// (eventQueue) and a full queue drops it and counts it
// (ferry_runtime_events_dropped_total{reason="queue_full"}). One
// goroutine sends what is queued, one batch per type to partition 0 of
// the type's topic, so each topic is in event order. A send that fails
// is logged (at most once a minute, with the count) and its events are
// dropped and counted (reason "send_failed"); the client reconnects by
// itself. Events are a best-effort record: those queued when the process
// dies are lost, and the ids (sysevents.New) let a consumer recognise one
// published twice.
//
// Where the topics come from: ferry run's embedded broker makes them
// (with events on). On another server the runtime makes the stream and
// its two topics when they are missing if it may create streams (the
// embedded broker, or [iggy] create_missing = true), with the retention
// the broker uses (sysevents.SegmentSize, DefaultMaxTopicSize,
// DefaultMessageExpiry); otherwise it logs once that events are not
// published until they exist, and counts them as send_failed. On an
// external Iggy server only these two types exist: the broker's own
// events are Ferry's embedded broker's.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	eventQueue       = 1024
	eventDrainOnStop = 5 * time.Second
)

// events publishes the runtime's events. A nil *events ignores every
// call.
type events struct {
	rt       *Runtime
	q        chan sysevents.Event
	instance string
	seq      atomic.Uint64
	cancel   context.CancelFunc
	stop     chan struct{} // closed by close: send what is queued, then end
	done     chan struct{}
	once     sync.Once

	// sender goroutine only
	client   *iggy.Client
	ready    map[sysevents.Type]bool // topics known to exist
	lastWarn time.Time
	held     int

	published *prometheus.CounterVec
	dropped   *prometheus.CounterVec
}

const (
	dropQueueFull  = "queue_full"
	dropSendFailed = "send_failed"
)

// startEvents starts the publisher; Stop's closeResources ends it.
func (r *Runtime) startEvents() {
	ctx, cancel := context.WithCancel(context.Background())
	e := &events{rt: r, q: make(chan sysevents.Event, eventQueue), cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}),
		instance: strconv.FormatInt(r.started.UnixMicro(), 10), ready: map[sysevents.Type]bool{},
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_runtime_events_published_total",
			Help: "runtime events sent to the ferry.events stream, by type (Ferry)"}, []string{"type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_runtime_events_dropped_total",
			Help: "runtime events dropped: queue_full or send_failed (Ferry)"}, []string{"reason"}),
	}
	for _, reason := range []string{dropQueueFull, dropSendFailed} {
		e.dropped.WithLabelValues(reason)
	}
	if err := r.metrics.registry.Register(e.published); err == nil {
		_ = r.metrics.registry.Register(e.dropped)
	}
	r.events = e
	go e.run(ctx)
}

// close sends what is queued (for at most eventDrainOnStop) and ends the
// publisher. Idempotent.
func (e *events) close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		close(e.stop)
		t := time.AfterFunc(eventDrainOnStop, e.cancel)
		<-e.done
		t.Stop()
		e.cancel()
	})
}

// emit offers ev to the queue without waiting.
func (e *events) emit(typ sysevents.Type, subject, key string, data any) {
	if e == nil {
		return
	}
	if key == "" {
		key = e.instance + "/" + strconv.FormatUint(e.seq.Add(1), 10)
	}
	ev, err := sysevents.New(typ, sysevents.SourceRuntime, subject, key, time.Now(), data)
	if err != nil {
		e.rt.log.Error("events: building an event failed", "type", typ, "err", err)
		return
	}
	if e.rt.broker != nil { // in-process: the broker's own queue, no connection
		if e.rt.broker.PublishEvent(ev) {
			e.published.WithLabelValues(string(typ)).Inc()
		} else {
			e.dropped.WithLabelValues(dropQueueFull).Inc()
		}
		return
	}
	select {
	case e.q <- ev:
	default:
		e.dropped.WithLabelValues(dropQueueFull).Inc()
	}
}

func (e *events) run(ctx context.Context) {
	defer close(e.done)
	defer func() {
		if e.client != nil {
			e.client.Close()
		}
	}()
	for {
		var first sysevents.Event
		select {
		case first = <-e.q:
		case <-e.stop: // send what is left, then end
			select {
			case first = <-e.q:
			default:
				return
			}
		case <-ctx.Done():
			return
		}
		batch := []sysevents.Event{first}
	more:
		for len(batch) < 256 {
			select {
			case ev := <-e.q:
				batch = append(batch, ev)
			default:
				break more
			}
		}
		e.send(ctx, batch)
	}
}

// send sends batch, one SendMessages per type in the order the types
// first occur.
func (e *events) send(ctx context.Context, batch []sysevents.Event) {
	var order []sysevents.Type
	byType := map[sysevents.Type][]iggy.Message{}
	for i := range batch {
		ev := &batch[i]
		payload, err := ev.Encode()
		if err != nil {
			e.failed(ev.Type, 1, err)
			continue
		}
		id, _ := sysevents.ParseID(ev.ID)
		if _, seen := byType[ev.Type]; !seen {
			order = append(order, ev.Type)
		}
		byType[ev.Type] = append(byType[ev.Type], iggy.Message{ID: id, Payload: payload, Headers: ev.Headers(), OriginTimestamp: ev.Time})
	}
	for _, typ := range order {
		msgs := byType[typ]
		if err := e.sendType(ctx, typ, msgs); err != nil {
			e.failed(typ, len(msgs), err)
			continue
		}
		e.published.WithLabelValues(string(typ)).Add(float64(len(msgs)))
	}
}

func (e *events) sendType(ctx context.Context, typ sysevents.Type, msgs []iggy.Message) error {
	if e.client == nil {
		c, err := e.rt.dial(ctx, "events")
		if err != nil {
			return fmt.Errorf("connect to %s: %w", e.rt.addr, err)
		}
		e.client = c
	}
	if !e.ready[typ] {
		if err := e.ensure(ctx, typ); err != nil {
			return err
		}
		e.ready[typ] = true
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := e.client.SendMessages(sctx, iggy.NamedID(sysevents.Stream), iggy.NamedID(typ.Topic()), iggy.ToPartition(0), msgs)
	if errors.Is(err, iggy.ErrTopicNotFound) || errors.Is(err, iggy.ErrStreamNotFound) {
		e.ready[typ] = false
	}
	if err != nil {
		return fmt.Errorf("send to %s/%s: %w", sysevents.Stream, typ.Topic(), err)
	}
	return nil
}

// ensure checks that typ's topic exists, making it (and the stream) when
// the runtime may create streams.
func (e *events) ensure(ctx context.Context, typ sysevents.Type) error {
	create := e.rt.cfg.Iggy.Embedded() || e.rt.cfg.Iggy.CreateMissing
	sid, tid := iggy.NamedID(sysevents.Stream), iggy.NamedID(typ.Topic())
	_, err := e.client.GetTopic(ctx, sid, tid)
	if err == nil {
		return nil
	}
	if !errors.Is(err, iggy.ErrTopicNotFound) && !errors.Is(err, iggy.ErrStreamNotFound) {
		return fmt.Errorf("get topic %s/%s: %w", sysevents.Stream, typ.Topic(), err)
	}
	if !create {
		return fmt.Errorf("topic %s/%s does not exist on %s: create it, or set create_missing = true in [iggy], for the runtime's events",
			sysevents.Stream, typ.Topic(), e.rt.addr)
	}
	if _, err := e.client.GetStream(ctx, sid); errors.Is(err, iggy.ErrStreamNotFound) {
		if _, err := e.client.CreateStream(ctx, sysevents.Stream); err != nil && !errors.Is(err, iggy.ErrStreamNameAlreadyExists) {
			return fmt.Errorf("create stream %s: %w", sysevents.Stream, err)
		}
	}
	_, err = e.client.CreateTopic(ctx, sid, typ.Topic(), 1, iggy.TopicSegmentSize(sysevents.SegmentSize),
		iggy.TopicMaxSize(sysevents.DefaultMaxTopicSize), iggy.TopicMessageExpiry(sysevents.DefaultMessageExpiry))
	if err != nil && !errors.Is(err, iggy.ErrTopicNameAlreadyExists) {
		return fmt.Errorf("create topic %s/%s: %w", sysevents.Stream, typ.Topic(), err)
	}
	e.rt.log.Info("events: created the runtime's event topic", "stream", sysevents.Stream, "topic", typ.Topic())
	return nil
}

// failed counts n dropped events and logs at most once a minute.
func (e *events) failed(typ sysevents.Type, n int, err error) {
	e.dropped.WithLabelValues(dropSendFailed).Add(float64(n))
	e.held += n
	if now := time.Now(); e.lastWarn.IsZero() || now.Sub(e.lastWarn) >= time.Minute {
		e.rt.log.Warn("events: publishing the runtime's events failed; dropped", "type", typ, "events", e.held, "err", err)
		e.lastWarn, e.held = now, 0
	}
}

// statusChanged publishes connector.status_changed.
func (e *events) statusChanged(kind connector.Kind, key string, from, to Status, lastErr string) {
	if e == nil || from == to {
		return
	}
	d := sysevents.ConnectorStatusData{Kind: string(kind), Key: key, From: string(from), To: string(to)}
	if to == StatusError {
		d.Error = truncate(lastErr, 1000)
	}
	e.emit(sysevents.ConnectorStatusChanged, "connectors/"+string(kind)+"/"+key, "", d)
}
