package live

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/ferryhq/ferry/iggy"
)

// ErrNoDeletionValue is wrapped by Apply when a key published before is
// no longer declared and the Target has no DeletionValueFunc to make its
// deletion marker.
var ErrNoDeletionValue = errors.New("live: a key was deleted but the target has no deletion-value function")

// MaxKeyLen is the longest key, in bytes: a key travels in a user header,
// whose values are 1..255 bytes.
const MaxKeyLen = 255

// Target publishes keyed values to one partition of a topic and sends
// only what changed. Each round, the program declares every key it wants
// to exist with its value (Declare, DeclareBytes), then calls Apply, which
// sends a message for each key whose value differs from what was last
// published for it (new keys included), and a deletion marker for each
// key published before and not declared in this round.
//
// Messages carry the key in the KeyHeader user header, and deletion
// markers also the DeletedHeader; a Map with StringKey (or BytesKey) and
// WithDeletion(IsDeleted) reads them back as the declared map.
//
// What was published (per key, a SHA-256 of the value) is kept in a Store
// and saved after every Apply that sent something, so a restarted program
// sends only real changes. A crash between a send and the save makes the
// next run send those keys again: delivery is at least once, which a
// keyed reader absorbs.
//
// Ending a Target: Drain declares nothing and applies, which sends a
// deletion marker for every key published, then closes the target. Close
// without Drain abandons it: nothing is sent, the topic keeps what was
// published, and the Store keeps the state for the next Target to carry
// on from.
//
// Streams and topics are the user's: a Target never creates or deletes
// them. A Target is safe for concurrent use; Declare waits while an Apply
// runs.
type Target struct {
	h             *Handle
	stream, topic iggy.Identifier
	cfg           targetConfig
	ident         targetState

	mu        sync.Mutex
	declared  map[Key][]byte
	order     []Key // declaration order
	published map[Key]fingerprint
	dirty     bool // published differs from what the Store holds
	closed    bool
	bg        sync.WaitGroup
}

// Applied counts what one successful Apply did. (After a failed one,
// Published tells what is published.)
type Applied struct {
	// Upserts is the number of values sent (new or changed keys).
	Upserts int
	// Deletes is the number of deletion markers sent.
	Deletes int
	// Unchanged is the number of declared keys whose value was already
	// published.
	Unchanged int
}

// Target opens a keyed target on stream/topic, partition 0 unless
// WithPartition says otherwise, with its state in WithStateFile or
// WithStore (one is required). It checks that the topic and partition
// exist and loads the state; the state must be this target's (the same
// stream and topic identifiers and partition), or ErrStateMismatch.
func (h *Handle) Target(ctx context.Context, stream, topic iggy.Identifier, opts ...TargetOption) (*Target, error) {
	var cfg targetConfig
	for _, o := range opts {
		if o != nil {
			o.applyTarget(&cfg)
		}
	}
	if cfg.stores != 1 || cfg.store == nil {
		return nil, fmt.Errorf("%w: a Target needs one state store: WithStateFile(path) or WithStore(s) (NewMemoryStore for state that need not last)", ErrInvalidOption)
	}
	td, err := h.producer.GetTopic(ctx, stream, topic)
	if err != nil {
		return nil, fmt.Errorf("live: target %s/%s (the library never creates streams or topics): %w", stream, topic, err)
	}
	if _, err := findPartition(td, cfg.partition); err != nil {
		return nil, err
	}
	t := &Target{h: h, stream: stream, topic: topic, cfg: cfg,
		ident:    targetState{Server: h.ID(), Stream: stream.String(), Topic: topic.String(), Partition: cfg.partition},
		declared: map[Key][]byte{}}
	blob, err := cfg.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("live: target %s/%s: loading state: %w", stream, topic, err)
	}
	st, published, err := decodeState(blob)
	if err != nil {
		return nil, fmt.Errorf("live: target %s/%s: %w", stream, topic, err)
	}
	if blob != nil && (st.Stream != t.ident.Stream || st.Topic != t.ident.Topic || st.Partition != t.ident.Partition) {
		return nil, fmt.Errorf("%w: the state is for %s/%s partition %d, this target is %s/%s partition %d",
			ErrStateMismatch, st.Stream, st.Topic, st.Partition, t.ident.Stream, t.ident.Topic, t.ident.Partition)
	}
	t.published = published
	return t, nil
}

// checkKey validates a key.
func checkKey(k Key) error {
	switch {
	case k.Name == "":
		return fmt.Errorf("%w: empty key", ErrInvalidOption)
	case len(k.Name) > MaxKeyLen:
		return fmt.Errorf("%w: key %.40q... is %d bytes, at most %d", ErrInvalidOption, k.Name, len(k.Name), MaxKeyLen)
	case !k.Binary && !utf8.ValidString(k.Name):
		return fmt.Errorf("%w: key %q is not valid UTF-8 (use DeclareBytes for binary keys)", ErrInvalidOption, k.Name)
	}
	return nil
}

func checkValue(what string, k Key, v []byte) error {
	switch {
	case len(v) == 0:
		return fmt.Errorf("%w: %s for key %s is empty (an Iggy message needs a payload)", ErrInvalidOption, what, k)
	case len(v) > iggy.MaxPayloadSize:
		return fmt.Errorf("%w: %s for key %s is %d bytes, at most %d", ErrInvalidOption, what, k, len(v), iggy.MaxPayloadSize)
	}
	return nil
}

// Declare says key (a string key) should have value after the next Apply.
// Declaring a key again in one round replaces its value. The value is
// copied.
func (t *Target) Declare(key string, value []byte) error {
	return t.declare(Key{Name: key}, value)
}

// DeclareBytes is Declare for a binary key, which is distinct from the
// string key with the same bytes.
func (t *Target) DeclareBytes(key, value []byte) error {
	return t.declare(Key{Name: string(key), Binary: true}, value)
}

func (t *Target) declare(k Key, value []byte) error {
	if err := checkKey(k); err != nil {
		return err
	}
	if err := checkValue("value", k, value); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("live: target %s/%s: %w", t.stream, t.topic, iggy.ErrClosed)
	}
	if _, ok := t.declared[k]; !ok {
		t.order = append(t.order, k)
	}
	t.declared[k] = bytes.Clone(value)
	return nil
}

// Apply ends the round: it sends the changed values and the deletion
// markers, saves the state and starts a new, empty round. Nothing is sent
// when a deletion has no DeletionValueFunc (ErrNoDeletionValue) or the
// function fails. When a send or the save fails, Apply returns the error
// and keeps the round's declarations: calling Apply again sends what is
// still missing.
func (t *Target) Apply(ctx context.Context) (Applied, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Applied{}, fmt.Errorf("live: target %s/%s: %w", t.stream, t.topic, iggy.ErrClosed)
	}
	return t.apply(ctx)
}

// change is one message Apply sends, and what it does to the state.
type change struct {
	key    Key
	fp     fingerprint
	delete bool
}

func (t *Target) apply(ctx context.Context) (Applied, error) {
	var a Applied
	var msgs []iggy.Message
	var changes []change
	for _, k := range t.order {
		v := t.declared[k]
		fp := sha256.Sum256(v)
		if old, ok := t.published[k]; ok && old == fp {
			a.Unchanged++
			continue
		}
		h := []iggy.Entry{k.header()}
		if err := iggy.CheckHeaders(h); err != nil {
			return Applied{}, fmt.Errorf("live: target %s/%s: key %s: iggy: %w", t.stream, t.topic, k, err)
		}
		msgs = append(msgs, iggy.Message{Payload: v, Headers: h})
		changes = append(changes, change{key: k, fp: fp})
		a.Upserts++
	}
	var gone []Key
	for _, k := range sortedKeys(t.published) {
		if _, ok := t.declared[k]; !ok {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 && t.cfg.deletionValue == nil {
		return Applied{}, fmt.Errorf("live: target %s/%s: %d published keys are no longer declared (the first: %s); give WithDeletionValue to send deletion markers: %w",
			t.stream, t.topic, len(gone), gone[0], ErrNoDeletionValue)
	}
	for _, k := range gone {
		v, err := t.cfg.deletionValue(k)
		if err == nil {
			err = checkValue("deletion value", k, v)
		}
		if err != nil {
			return Applied{}, fmt.Errorf("live: target %s/%s: deletion value for key %s: %w", t.stream, t.topic, k, err)
		}
		h := []iggy.Entry{k.header(), iggy.Header(DeletedHeader, iggy.BoolValue(true))}
		if err := iggy.CheckHeaders(h); err != nil {
			return Applied{}, fmt.Errorf("live: target %s/%s: key %s: iggy: %w", t.stream, t.topic, k, err)
		}
		msgs = append(msgs, iggy.Message{Payload: v, Headers: h})
		changes = append(changes, change{key: k, delete: true})
		a.Deletes++
	}

	sendErr := t.send(ctx, msgs, changes)
	var saveErr error
	if t.dirty {
		saveErr = t.save(ctx)
	}
	if err := errors.Join(sendErr, saveErr); err != nil {
		return Applied{}, err
	}
	clear(t.declared)
	t.order = t.order[:0]
	return a, nil
}

// Chunks of one send: Iggy takes any number of messages in a batch, but a
// bounded batch keeps a failure small.
const (
	sendChunkMessages = 1000
	sendChunkBytes    = 8 << 20
)

// send sends msgs in chunks and records each sent chunk's changes.
func (t *Target) send(ctx context.Context, msgs []iggy.Message, changes []change) error {
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && end-start < sendChunkMessages && (end == start || size+msgs[end].FrameSize() <= sendChunkBytes) {
			size += msgs[end].FrameSize()
			end++
		}
		if err := t.sendChunk(ctx, msgs[start:end]); err != nil {
			return fmt.Errorf("live: target %s/%s: sending %d messages (%d of %d sent before): %w",
				t.stream, t.topic, end-start, start, len(msgs), err)
		}
		for _, c := range changes[start:end] {
			if c.delete {
				delete(t.published, c.key)
			} else {
				t.published[c.key] = c.fp
			}
		}
		t.dirty = true
		start = end
	}
	return nil
}

// sendChunk sends in the background, so that ctx ending does not cut the
// request short and drop a connection other users of the handle share;
// a send given up on may or may not land, and is sent again by the next
// Apply.
func (t *Target) sendChunk(ctx context.Context, msgs []iggy.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		_, err := t.h.producer.SendMessages(context.WithoutCancel(ctx), t.stream, t.topic, iggy.ToPartition(t.cfg.partition), msgs)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Target) save(ctx context.Context) error {
	blob, err := encodeState(t.ident, t.published)
	if err != nil {
		return fmt.Errorf("live: target %s/%s: encoding state: %w", t.stream, t.topic, err)
	}
	if err := t.cfg.store.Save(ctx, blob); err != nil {
		return fmt.Errorf("live: target %s/%s: saving state (what was sent will be sent again after a restart): %w", t.stream, t.topic, err)
	}
	t.dirty = false
	return nil
}

// Published returns the keys published and not deleted, string keys first,
// each kind in byte order.
func (t *Target) Published() []Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sortedKeys(t.published)
}

// Drain sends a deletion marker for every key published (whatever was
// declared in this round is dropped first), saves the now empty state and
// closes the target. It needs a DeletionValueFunc when anything is
// published. When it fails, the target stays open: Drain again, or Close
// to abandon.
func (t *Target) Drain(ctx context.Context) (Applied, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return Applied{}, fmt.Errorf("live: target %s/%s: %w", t.stream, t.topic, iggy.ErrClosed)
	}
	clear(t.declared)
	t.order = t.order[:0]
	a, err := t.apply(ctx)
	t.mu.Unlock()
	if err != nil {
		return a, err
	}
	return a, t.Close(ctx)
}

// Close abandons the target: the round's declarations are dropped and
// nothing is sent; what was published stays in the topic and in the
// Store. It waits (until ctx ends) for a send an Apply gave up on. Close
// is idempotent; the Handle stays open.
func (t *Target) Close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	clear(t.declared)
	t.order = nil
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("live: target %s/%s: close: %w", t.stream, t.topic, ctx.Err())
	}
}
