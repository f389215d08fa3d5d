package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy"
)

// Defaults of the options.
const (
	DefaultStream        = "ferry"
	DefaultTopicPrefix   = "lease-"
	DefaultGroup         = "ferry-lease"
	DefaultRenewInterval = 500 * time.Millisecond
	DefaultHoldTimeout   = 2 * time.Second
	DefaultTakeoverDelay = 3 * time.Second
)

// ErrLost is what LostReason wraps once the lease has been lost.
var ErrLost = errors.New("lease lost")

// ErrHeld is returned by Acquire when the lease is already held by this
// Lease.
var ErrHeld = errors.New("lease already held")

// Option configures a Lease.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	stream        string
	topicPrefix   string
	group         string
	holder        string
	renew         time.Duration
	hold          time.Duration
	takeover      time.Duration
	createCompact bool
}

// WithStream sets the stream of the lease topics (created when missing).
// Default DefaultStream ("ferry").
func WithStream(name string) Option { return optionFunc(func(c *config) { c.stream = name }) }

// WithTopicPrefix sets the prefix of the lease topic: the topic of lease
// name is prefix+name. Default DefaultTopicPrefix ("lease-").
func WithTopicPrefix(p string) Option { return optionFunc(func(c *config) { c.topicPrefix = p }) }

// WithGroup sets the consumer group contenders join. Default
// DefaultGroup ("ferry-lease").
func WithGroup(name string) Option { return optionFunc(func(c *config) { c.group = name }) }

// WithHolder sets the holder id written in claims (for operators; it
// plays no part in the protocol). Default "<hostname>:<pid>".
func WithHolder(id string) Option { return optionFunc(func(c *config) { c.holder = id }) }

// WithRenewInterval sets how often a contender looks at its assignment
// and a holder confirms it. Default DefaultRenewInterval (500ms).
func WithRenewInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.renew = d }) }

// WithHoldTimeout sets how long a holder keeps the lease without a
// confirmed renewal: lost closes when no renewal sent within the last
// hold timeout was confirmed. Default DefaultHoldTimeout (2s).
func WithHoldTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.hold = d }) }

// WithTakeoverDelay sets how long a new holder waits, assigned, before it
// claims a lease whose last holder did not release it: longer than the
// hold timeout, so that the old holder has given up by then. Default
// DefaultTakeoverDelay (3s).
func WithTakeoverDelay(d time.Duration) Option { return optionFunc(func(c *config) { c.takeover = d }) }

// Lease is one contender for the lease of a name. Acquire and Release are
// for one goroutine at a time; LostReason and Epoch may be called from
// any goroutine.
type Lease struct {
	c     *iggy.Client
	name  string
	cfg   config
	topic string

	stream, topicID, groupID iggy.Identifier

	mu        sync.Mutex // serialises Acquire and Release
	setupDone bool
	session   uint32
	cur       *hold
	waited    bool // the last Acquire waited the takeover delay (for tests)
}

// hold is one period of holding the lease.
type hold struct {
	epoch uint64
	lost  chan struct{}
	stop  chan struct{} // closed by Release: the renewer ends
	done  chan struct{} // closed when the renewer has ended

	mu     sync.Mutex
	gone   bool
	reason error
	timer  *time.Timer
}

// New prepares a contender for the lease of name on c. It does nothing
// on the server until Acquire. name becomes part of a topic name: 1 to
// 255 bytes with the prefix.
func New(c *iggy.Client, name string, opts ...Option) (*Lease, error) {
	host, _ := os.Hostname()
	cfg := config{stream: DefaultStream, topicPrefix: DefaultTopicPrefix, group: DefaultGroup,
		holder: host + ":" + strconv.Itoa(os.Getpid()),
		renew:  DefaultRenewInterval, hold: DefaultHoldTimeout, takeover: DefaultTakeoverDelay, createCompact: true}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	var errs []error
	if c == nil {
		errs = append(errs, errors.New("no client"))
	}
	topic := cfg.topicPrefix + name
	if name == "" || len(topic) > 255 {
		errs = append(errs, fmt.Errorf("lease name %q: want 1 to %d bytes", name, 255-len(cfg.topicPrefix)))
	}
	if cfg.stream == "" || len(cfg.stream) > 255 || cfg.group == "" || len(cfg.group) > 255 {
		errs = append(errs, fmt.Errorf("stream %q and group %q must be 1 to 255 bytes", cfg.stream, cfg.group))
	}
	if cfg.renew <= 0 || cfg.hold <= cfg.renew || cfg.takeover <= cfg.hold {
		errs = append(errs, fmt.Errorf("want 0 < renew interval (%s) < hold timeout (%s) < takeover delay (%s)",
			cfg.renew, cfg.hold, cfg.takeover))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("lease: %w", errors.Join(errs...))
	}
	return &Lease{c: c, name: name, cfg: cfg, topic: topic,
		stream: iggy.NamedID(cfg.stream), topicID: iggy.NamedID(topic), groupID: iggy.NamedID(cfg.group)}, nil
}

// Name returns the lease's name.
func (l *Lease) Name() string { return l.name }

// record is a message of the lease topic.
type record struct {
	Type   string    `json:"type"` // "claim" or "release"
	Holder string    `json:"holder"`
	Time   time.Time `json:"time"`
	Epoch  uint64    `json:"epoch,omitempty"` // release: the epoch released
}

// Acquire blocks until this contender holds the lease, or ctx ends. It
// returns the holder's epoch (the offset of its claim in the lease topic
// plus one: at least 1, and higher for every later holder) and a channel
// that is closed when the lease is lost: the assignment moved away, the
// session changed (a reconnect), or no renewal was confirmed within the
// hold timeout. When lost closes, stop everything the lease guards at
// once; LostReason says why. Call Acquire again to contend again, or
// Release.
func (l *Lease) Acquire(ctx context.Context) (epoch uint64, lost <-chan struct{}, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		select {
		case <-l.cur.lost:
			<-l.cur.done
			l.cur = nil
		default:
			return 0, nil, fmt.Errorf("lease %s: %w (epoch %d)", l.name, ErrHeld, l.cur.epoch)
		}
	}
	if err := l.setup(ctx); err != nil {
		return 0, nil, err
	}
	for {
		h, err := l.tryAcquire(ctx)
		switch {
		case h != nil:
			l.cur = h
			go l.renew(h)
			return h.epoch, h.lost, nil
		case ctx.Err() != nil:
			return 0, nil, fmt.Errorf("lease %s: acquire: %w", l.name, ctx.Err())
		case err != nil && !transient(err):
			return 0, nil, fmt.Errorf("lease %s: acquire: %w", l.name, err)
		}
		if err := sleep(ctx, l.cfg.renew); err != nil {
			return 0, nil, fmt.Errorf("lease %s: acquire: %w", l.name, err)
		}
	}
}

// transient reports whether an error of a round of Acquire is worth
// another round: connection trouble, or a membership that has to be
// taken again.
func transient(err error) bool {
	return errors.Is(err, iggy.ErrConnection) || errors.Is(err, errNotHeld) ||
		errors.Is(err, iggy.ErrConsumerGroupMemberNotFound) || errors.Is(err, context.DeadlineExceeded)
}

var errNotHeld = errors.New("not assigned the lease partition")

// tryAcquire is one round of Acquire: join, and when assigned partition
// 0, wait out the takeover delay if the last holder did not release, and
// claim. It returns nil, nil (or a transient error) when not assigned.
func (l *Lease) tryAcquire(ctx context.Context) (*hold, error) {
	if err := l.join(ctx); err != nil {
		return nil, err
	}
	held, err := l.check(ctx)
	if err != nil || !held {
		return nil, err
	}
	released, err := l.lastReleased(ctx)
	if err != nil {
		return nil, err
	}
	l.waited = !released
	if !released {
		// The last holder may still be running until its hold timeout
		// passes: stay assigned for the takeover delay first.
		deadline := time.Now().Add(l.cfg.takeover)
		for time.Now().Before(deadline) {
			if err := sleep(ctx, min(l.cfg.renew, time.Until(deadline))); err != nil {
				return nil, err
			}
			held, err := l.check(ctx)
			if err != nil || !held {
				return nil, err
			}
		}
	}
	sent := time.Now()
	epoch, err := l.claim(ctx)
	if err != nil {
		return nil, err
	}
	// Still assigned, in the same session, after the claim: the claim is
	// this holder's. (If not, the claim stays in the log unused and the
	// next holder waits the takeover delay.)
	if held, err := l.check(ctx); err != nil || !held {
		return nil, err
	}
	h := &hold{epoch: epoch, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	h.timer = time.AfterFunc(time.Until(sent.Add(l.cfg.hold)), func() {
		h.lose(fmt.Errorf("%w: no renewal confirmed within the %s hold timeout", ErrLost, l.cfg.hold))
	})
	return h, nil
}

// setup creates the stream, the lease topic (one partition; compacted on
// Ferry's broker) and the group when missing.
func (l *Lease) setup(ctx context.Context) error {
	if l.setupDone {
		return nil
	}
	if _, err := l.c.CreateStream(ctx, l.cfg.stream); err != nil && !errors.Is(err, iggy.ErrStreamNameAlreadyExists) {
		return fmt.Errorf("lease %s: create stream %s: %w", l.name, l.cfg.stream, err)
	}
	_, err := l.c.CreateTopic(ctx, l.stream, l.topic, 1, iggy.TopicCompact(true))
	if errors.Is(err, iggy.ErrUnsupportedOptionKey) || errors.Is(err, iggy.ErrInvalidOptionValue) {
		_, err = l.c.CreateTopic(ctx, l.stream, l.topic, 1) // not Ferry's broker: an ordinary topic
	}
	if err != nil && !errors.Is(err, iggy.ErrTopicNameAlreadyExists) {
		return fmt.Errorf("lease %s: create topic %s/%s: %w", l.name, l.cfg.stream, l.topic, err)
	}
	d, err := l.c.GetTopic(ctx, l.stream, l.topicID)
	if err != nil {
		return fmt.Errorf("lease %s: read topic %s/%s: %w", l.name, l.cfg.stream, l.topic, err)
	}
	if d.PartitionsCount != 1 {
		return fmt.Errorf("lease %s: topic %s/%s has %d partitions, a lease topic must have exactly 1", l.name, l.cfg.stream, l.topic, d.PartitionsCount)
	}
	if _, err := l.c.CreateConsumerGroup(ctx, l.stream, l.topicID, l.cfg.group); err != nil && !errors.Is(err, iggy.ErrConsumerGroupNameAlreadyExists) {
		return fmt.Errorf("lease %s: create group %s: %w", l.name, l.cfg.group, err)
	}
	l.setupDone = true
	return nil
}

// join makes this client a member of the group (idempotent) and records
// the session it is a member in.
func (l *Lease) join(ctx context.Context) error {
	if err := l.c.JoinConsumerGroup(ctx, l.stream, l.topicID, l.groupID); err != nil {
		return err
	}
	me, err := l.c.Me(ctx)
	if err != nil {
		return err
	}
	l.session = me.ClientID
	return nil
}

// check reports whether this member holds partition 0 now, in the session
// it joined in. The sync goes first: a session seen unchanged after it
// means the sync was answered in that session.
func (l *Lease) check(ctx context.Context) (bool, error) {
	a, err := l.c.SyncConsumerGroup(ctx, l.stream, l.topicID, l.groupID)
	if err != nil {
		return false, err
	}
	me, err := l.c.Me(ctx)
	if err != nil {
		return false, err
	}
	if me.ClientID != l.session {
		return false, fmt.Errorf("%w: the session changed (client %d, now %d): the connection was replaced", errNotHeld, l.session, me.ClientID)
	}
	return slices.Contains(a.Partitions, 0), nil
}

// lastReleased reports whether the lease topic ends with a release that
// directly follows its own claim: the last holder stopped, and no claim
// came after it.
func (l *Lease) lastReleased(ctx context.Context) (bool, error) {
	d, err := l.c.GetTopic(ctx, l.stream, l.topicID)
	if err != nil {
		return false, err
	}
	if len(d.Partitions) != 1 || d.Partitions[0].MessagesCount == 0 {
		return false, err // empty: nobody ever claimed it, but a claim may be on its way; wait
	}
	last := d.Partitions[0].CurrentOffset
	r, err := l.c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
		Stream: l.stream, Topic: l.topicID, Partition: iggy.Partition(0), Strategy: iggy.AtOffset(last), Count: 1})
	if err != nil {
		return false, err
	}
	if len(r.Messages) == 0 || r.Messages[0].Offset != last {
		return false, nil
	}
	var rec record
	if json.Unmarshal(r.Messages[0].Payload, &rec) != nil {
		return false, nil
	}
	return rec.Type == "release" && rec.Epoch == last, nil // claim at last-1, epoch last
}

// claim appends a claim and returns its epoch: its offset plus one.
func (l *Lease) claim(ctx context.Context) (uint64, error) {
	off, err := l.append(ctx, record{Type: "claim", Holder: l.cfg.holder, Time: time.Now().UTC()})
	if err != nil {
		return 0, err
	}
	return off + 1, nil
}

// append sends rec to the lease topic and returns its offset.
func (l *Lease) append(ctx context.Context, rec record) (uint64, error) {
	payload, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	msgs := []iggy.Message{{Payload: payload, Headers: []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue(rec.Type))}}}
	conf, err := l.c.SendMessages(ctx, l.stream, l.topicID, iggy.ToPartition(0), msgs)
	if err != nil {
		return 0, err
	}
	if conf != (iggy.SendConfirmation{}) {
		return conf.BaseOffset, nil
	}
	// Offset 0 of stream 0, topic 0, or a server that confirms no offset
	// (an empty confirmation): find the record by its id.
	id := msgs[0].ID
	d, err := l.c.GetTopic(ctx, l.stream, l.topicID)
	if err != nil {
		return 0, err
	}
	cur := d.Partitions[0].CurrentOffset
	from := cur - min(cur, 1000)
	for from <= cur {
		r, err := l.c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: l.stream, Topic: l.topicID, Partition: iggy.Partition(0), Strategy: iggy.AtOffset(from), Count: 100})
		if err != nil {
			return 0, err
		}
		if len(r.Messages) == 0 {
			break
		}
		for _, m := range r.Messages {
			if m.ID == id {
				return m.Offset, nil
			}
		}
		from = r.Messages[len(r.Messages)-1].Offset + 1
	}
	return 0, fmt.Errorf("lease %s: the server confirmed no offset and record %x is not in the topic's last 1000 messages", l.name, id)
}

// renew confirms the assignment every renew interval while h is held,
// pushing the hold deadline to the send time of each confirmed check
// plus the hold timeout.
func (l *Lease) renew(h *hold) {
	defer close(h.done)
	t := time.NewTicker(l.cfg.renew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-h.lost:
			l.leave()
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.hold)
		held, err := l.check(ctx)
		cancel()
		switch {
		case err == nil && held:
			h.extend(sent.Add(l.cfg.hold))
		case err == nil:
			h.lose(fmt.Errorf("%w: the lease partition was assigned to another member", ErrLost))
		case errors.Is(err, errNotHeld) || errors.Is(err, iggy.ErrConsumerGroupMemberNotFound):
			h.lose(fmt.Errorf("%w: %w", ErrLost, err))
		}
		// Other errors: try again; the hold timer decides.
	}
}

// leave leaves the group after a loss, so that this member, not claiming,
// cannot be assigned the partition again and keep it from the others.
func (l *Lease) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.hold)
	defer cancel()
	_ = l.c.LeaveConsumerGroup(ctx, l.stream, l.topicID, l.groupID)
}

func (h *hold) extend(deadline time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.gone {
		h.timer.Reset(time.Until(deadline))
	}
}

func (h *hold) lose(reason error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.gone {
		h.gone, h.reason = true, reason
		h.timer.Stop()
		close(h.lost)
	}
}

// LostReason returns why the current (or last) hold was lost, matching
// ErrLost, or nil while it is held (or was released).
func (l *Lease) LostReason() error {
	l.mu.Lock()
	h := l.cur
	l.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason
}

// Release gives the lease up: the caller has stopped what it guards. A
// holder that still holds it appends a release, so the next holder claims
// at once instead of after the takeover delay; then it leaves the group.
// Release of a lease not held just leaves. Acquire may be called again
// afterwards.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if h := l.cur; h != nil {
		l.cur = nil
		close(h.stop)
		<-h.done
		h.mu.Lock()
		gone := h.gone
		h.mu.Unlock()
		if !gone {
			held, err := l.check(ctx)
			if err == nil && held {
				if _, err := l.append(ctx, record{Type: "release", Holder: l.cfg.holder, Time: time.Now().UTC(), Epoch: h.epoch}); err != nil {
					errs = append(errs, fmt.Errorf("append the release: %w", err))
				}
			}
			h.lose(fmt.Errorf("%w: released", ErrLost))
		}
	}
	if l.setupDone {
		err := l.c.LeaveConsumerGroup(ctx, l.stream, l.topicID, l.groupID)
		if err != nil && !errors.Is(err, iggy.ErrConsumerGroupMemberNotFound) && !errors.Is(err, iggy.ErrClosed) {
			errs = append(errs, fmt.Errorf("leave the group: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lease %s: release: %w", l.name, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
