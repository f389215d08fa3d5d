package iggystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/state"
)

// Defaults of Open.
const (
	DefaultStream = "ferry"
	DefaultTopic  = "state"
)

// ErrFenced is matched, together with state.ErrConflict, by the error of
// a Save, Delete or Claim refused because the key has state at a higher
// epoch: a newer lease holder has written it. Reloading does not help:
// this process has lost the key's lease and must stop its source.
var ErrFenced = errors.New("fenced by a newer epoch")

// Store is a state.Store kept in one Iggy topic with one partition. It is
// safe for concurrent use; its calls are serialised.
type Store struct {
	c             *iggy.Client
	stream, topic iggy.Identifier
	name          string // stream/topic, for errors

	mu     sync.Mutex
	closed bool
	next   uint64 // next offset to read
	keys   map[string]*keyState
	epochs map[string]uint64 // SetEpoch
}

// keyState is what the topic holds for one key: per epoch, the latest
// record (by offset) and the highest sequence seen.
type keyState struct {
	byEpoch map[uint64]*rec
}

type rec struct {
	offset  uint64
	seq     uint64 // of the latest record
	maxSeq  uint64 // highest sequence seen at this epoch
	deleted bool
	data    []byte
}

// Option configures Open.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	topicOpts []iggy.TopicOption
}

// WithTopicOptions adds options to the creation of the topic when it is
// missing (after the compaction option), e.g. iggy.TopicSegmentSize.
func WithTopicOptions(opts ...iggy.TopicOption) Option {
	return optionFunc(func(o *options) { o.topicOpts = append(o.topicOpts, opts...) })
}

// Open opens the store kept in stream/topic on c, creating the stream and
// the topic when missing (one partition; compacted on Ferry's broker, an
// ordinary topic elsewhere), and reads the topic. The client stays the
// caller's: Close does not close it.
func Open(ctx context.Context, c *iggy.Client, stream, topic string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if c == nil {
		return nil, errors.New("iggystate: no client")
	}
	if stream == "" || topic == "" {
		return nil, fmt.Errorf("iggystate: stream %q and topic %q must not be empty", stream, topic)
	}
	s := &Store{c: c, stream: iggy.NamedID(stream), topic: iggy.NamedID(topic), name: stream + "/" + topic,
		keys: map[string]*keyState{}, epochs: map[string]uint64{}}
	if err := s.create(ctx, stream, topic, o.topicOpts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) create(ctx context.Context, stream, topic string, extra []iggy.TopicOption) error {
	if _, err := s.c.CreateStream(ctx, stream); err != nil && !errors.Is(err, iggy.ErrStreamNameAlreadyExists) {
		return fmt.Errorf("iggystate: create stream %s: %w", stream, err)
	}
	opts := append([]iggy.TopicOption{iggy.TopicCompact(true)}, extra...)
	_, err := s.c.CreateTopic(ctx, s.stream, topic, 1, opts...)
	if errors.Is(err, iggy.ErrUnsupportedOptionKey) || errors.Is(err, iggy.ErrInvalidOptionValue) {
		_, err = s.c.CreateTopic(ctx, s.stream, topic, 1, extra...) // not Ferry's broker: an ordinary topic
	}
	if err != nil && !errors.Is(err, iggy.ErrTopicNameAlreadyExists) {
		return fmt.Errorf("iggystate: create topic %s: %w", s.name, err)
	}
	d, err := s.c.GetTopic(ctx, s.stream, s.topic)
	if err != nil {
		return fmt.Errorf("iggystate: read topic %s: %w", s.name, err)
	}
	if d.PartitionsCount != 1 {
		return fmt.Errorf("iggystate: topic %s has %d partitions, a state topic must have exactly 1", s.name, d.PartitionsCount)
	}
	return nil
}

// catchUp reads the topic from s.next to its end. Caller holds s.mu.
func (s *Store) catchUp(ctx context.Context) error {
	for {
		r, err := s.c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: s.stream, Topic: s.topic, Partition: iggy.Partition(0), Strategy: iggy.AtOffset(s.next), Count: 1000})
		if err != nil {
			return fmt.Errorf("iggystate: read %s from offset %d: %w", s.name, s.next, err)
		}
		if len(r.Messages) == 0 {
			return nil
		}
		for i := range r.Messages {
			m := &r.Messages[i]
			e, err := decodeEnvelope(m.Payload)
			if err != nil {
				return fmt.Errorf("iggystate: %s offset %d: %w: %w", s.name, m.Offset, state.ErrCorrupt, err)
			}
			s.apply(m.Offset, e)
			s.next = m.Offset + 1
		}
		if s.next > r.CurrentOffset {
			return nil
		}
	}
}

// apply records e, read (or written) at offset. Records are applied in
// offset order, and a record seen again (written, then read) is kept once.
// Caller holds s.mu.
func (s *Store) apply(offset uint64, e envelope) {
	ks := s.keys[e.key]
	if ks == nil {
		ks = &keyState{byEpoch: map[uint64]*rec{}}
		s.keys[e.key] = ks
	}
	r := ks.byEpoch[e.epoch]
	if r == nil {
		r = &rec{}
		ks.byEpoch[e.epoch] = r
	} else if offset < r.offset {
		return
	}
	r.offset, r.seq, r.deleted = offset, e.seq, e.deleted
	r.maxSeq = max(r.maxSeq, e.seq)
	r.data = nil
	if !e.deleted {
		r.data = append([]byte{}, e.data...)
	}
}

// current returns the key's highest epoch and its latest record (nil
// when the key has none). Caller holds s.mu.
func (s *Store) current(key string) (uint64, *rec) {
	ks := s.keys[key]
	if ks == nil {
		return 0, nil
	}
	var hi uint64
	var cur *rec
	for e, r := range ks.byEpoch {
		if cur == nil || e > hi {
			hi, cur = e, r
		}
	}
	return hi, cur
}

func version(epoch, seq uint64) state.Version {
	return state.Version(strconv.FormatUint(epoch, 10) + ":" + strconv.FormatUint(seq, 10))
}

// liveVersion is the version of cur, or zero when it is none or deleted.
func liveVersion(epoch uint64, cur *rec) state.Version {
	if cur == nil || cur.deleted {
		return ""
	}
	return version(epoch, cur.seq)
}

// SetEpoch sets the epoch this store writes key's state at: the lease
// epoch of the key's holder (package lease). Without it a key is written
// at epoch 0, as a single process without a lease does. The epoch of a
// key may only go up.
func (s *Store) SetEpoch(key string, epoch uint64) error {
	if err := state.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("iggystate: %w", state.ErrClosed)
	}
	if old := s.epochs[key]; epoch < old {
		return fmt.Errorf("iggystate: state %q: epoch %d is below the epoch %d already set", key, epoch, old)
	}
	s.epochs[key] = epoch
	return nil
}

// Claim sets key's epoch (SetEpoch) and fences older epochs at once: when
// the key's state was written at an older epoch, it is written again at
// epoch (and the older epochs' records get deletion markers), so that a
// holder of an older epoch is refused from now on even before this holder
// saves. It returns an error matching state.ErrConflict when the key
// already has state at a higher epoch: a newer holder exists. Call it
// after acquiring the lease and before Load.
func (s *Store) Claim(ctx context.Context, key string, epoch uint64) error {
	if err := s.SetEpoch(key, epoch); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx); err != nil {
		return err
	}
	hi, cur := s.current(key)
	switch {
	case cur == nil || hi == epoch:
		return nil
	case hi > epoch:
		return s.stale(key, "", hi, cur, epoch)
	}
	if cur.deleted {
		return s.send(ctx, key, epoch, nil, true)
	}
	return s.send(ctx, key, epoch, cur.data, false)
}

// ready checks the store is open and ctx live, and reads the topic to
// its end. Caller holds s.mu.
func (s *Store) ready(ctx context.Context) error {
	if s.closed {
		return fmt.Errorf("iggystate: %w", state.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.catchUp(ctx)
}

// stale is the conflict of a writer at epoch below the key's highest hi.
func (s *Store) stale(key string, expected state.Version, hi uint64, cur *rec, epoch uint64) error {
	return fmt.Errorf("iggystate: %s: a newer holder wrote state %q at epoch %d, this store writes at epoch %d: %w: %w",
		s.name, key, hi, epoch, ErrFenced, &state.ConflictError{Key: key, Expected: expected, Actual: liveVersion(hi, cur)})
}

// Load returns key's state: the latest record of its highest epoch,
// after reading the topic to its end.
func (s *Store) Load(ctx context.Context, key string) (state.State, error) {
	if err := state.ValidateKey(key); err != nil {
		return state.State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx); err != nil {
		return state.State{}, err
	}
	hi, cur := s.current(key)
	if cur == nil || cur.deleted {
		return state.State{}, fmt.Errorf("iggystate: %s: state %q: %w", s.name, key, state.ErrNotFound)
	}
	return state.State{Data: append([]byte{}, cur.data...), Version: version(hi, cur.seq)}, nil
}

// Save stores data for key at the key's epoch if its current version is
// expected. It refuses with state.ErrConflict when the version differs
// or the key has state at a higher epoch (a newer holder: stop).
func (s *Store) Save(ctx context.Context, key string, data []byte, expected state.Version) (state.Version, error) {
	if err := state.ValidateKey(key); err != nil {
		return "", err
	}
	if len(data) > state.MaxStateSize {
		return "", fmt.Errorf("iggystate: state %q is %d bytes, limit %d: %w", key, len(data), state.MaxStateSize, state.ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	epoch := s.epochs[key]
	hi, cur := s.current(key)
	if cur != nil && hi > epoch {
		return "", s.stale(key, expected, hi, cur, epoch)
	}
	if v := liveVersion(hi, cur); v != expected {
		return "", fmt.Errorf("iggystate: %s: %w", s.name, &state.ConflictError{Key: key, Expected: expected, Actual: v})
	}
	if err := s.send(ctx, key, epoch, data, false); err != nil {
		return "", err
	}
	_, cur = s.current(key)
	return version(epoch, cur.seq), nil
}

// Delete removes key's state: deletion markers for the key at its epoch
// and at every older epoch it has records of.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := state.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx); err != nil {
		return err
	}
	epoch := s.epochs[key]
	hi, cur := s.current(key)
	if cur != nil && hi > epoch {
		return s.stale(key, "", hi, cur, epoch)
	}
	if cur == nil || cur.deleted {
		return fmt.Errorf("iggystate: %s: state %q: %w", s.name, key, state.ErrNotFound)
	}
	return s.send(ctx, key, epoch, nil, true)
}

// send appends, in one batch, key's record at epoch (data, or a deletion
// marker) and deletion markers for the key's older epochs that still have
// live records, and applies them.
// Caller holds s.mu.
func (s *Store) send(ctx context.Context, key string, epoch uint64, data []byte, deleted bool) error {
	ks := s.keys[key]
	var seq uint64 = 1
	if ks != nil {
		if r := ks.byEpoch[epoch]; r != nil {
			seq = r.maxSeq + 1
		}
	}
	main := envelope{deleted: deleted, epoch: epoch, seq: seq, key: key, data: data}
	envs := []envelope{main}
	if ks != nil {
		for e, r := range ks.byEpoch {
			if e < epoch && !r.deleted {
				envs = append(envs, envelope{deleted: true, epoch: e, seq: r.maxSeq + 1, key: key})
			}
		}
	}
	msgs := make([]iggy.Message, len(envs))
	for i, e := range envs {
		hs := []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue(key+"@"+strconv.FormatUint(e.epoch, 10)))}
		if e.deleted {
			hs = append(hs, iggy.Header(iggy.DeletedHeader, iggy.BoolValue(true)))
		}
		msgs[i] = iggy.Message{Payload: appendEnvelope(nil, e), Headers: hs}
	}
	conf, err := s.c.SendMessages(ctx, s.stream, s.topic, iggy.ToPartition(0), msgs)
	if err != nil {
		return fmt.Errorf("iggystate: %s: save state %q: %w", s.name, key, err)
	}
	if conf == (iggy.SendConfirmation{}) {
		// No offset confirmed: learn the records by reading them back.
		return s.catchUp(ctx)
	}
	for i, e := range envs {
		s.apply(conf.BaseOffset+uint64(i), e)
	}
	return nil
}

// Close ends the use of the store. The client stays open.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

var _ state.Store = (*Store)(nil)
