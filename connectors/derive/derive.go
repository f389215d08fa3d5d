package derive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/fsx"
	"github.com/ferryhq/ferry/udaf"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "derive",
		Summary: "aggregates topics per key and window into a changelog topic (count, sum, min, max, avg, distinct_count, latest, WebAssembly aggregates), exactly once with a deduplicating broker",
		Spec:    Spec,
		NewSink: New,
	})
}

// Sink is the derive sink. Consume calls are serialised: the groups and
// the watermark are shared by every input partition.
type Sink struct {
	s   *settings
	log interface {
		Warn(msg string, args ...any)
	}

	// loadUDAF opens the udaf module; a test may set another Aggregator.
	loadUDAF func(ctx context.Context, path string) (Aggregator, error)

	mu         sync.Mutex
	lock       *fsx.DirLock
	cp         *checkpoint
	groups     map[string]*group // by group id
	rows       map[string]*row   // input = "changelog": by rowID
	udaf       Aggregator
	client     *iggy.Client
	partitions []uint32 // the output topic's partition ids
	unsent     bool     // cp.Pending not yet sent
	broken     error    // a checkpoint failed to save: Consume refuses until reopened
	stats      Stats
}

// Stats counts what the sink did since it opened.
type Stats struct {
	Applied, Filtered, Late, Rejected, Skipped, Emitted uint64
}

// New builds a derive sink from its configuration.
func New(cfg connector.Config) (connector.Sink, error) {
	s, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	d := &Sink{s: s, log: nopLog{}}
	if cfg.Logger != nil {
		d.log = cfg.Logger
	}
	d.loadUDAF = func(ctx context.Context, path string) (Aggregator, error) {
		return udaf.Load(ctx, path, udaf.Limits{})
	}
	return d, nil
}

type nopLog struct{}

func (nopLog) Warn(string, ...any) {}

// Open locks and reads the checkpoint, loads the udaf, connects to the
// output server, creates the output topic when missing, and sends the
// outputs of the last batch again (the broker drops them if they arrived).
func (d *Sink) Open(ctx context.Context) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.MkdirAll(d.s.stateDir, 0o700); err != nil {
		return fmt.Errorf("derive: state_dir: %w", err)
	}
	if d.lock, err = fsx.LockDir(d.s.stateDir, "lock", 0o600); err != nil {
		return fmt.Errorf("derive: state_dir %s: %w", d.s.stateDir, err)
	}
	defer func() {
		if err != nil {
			d.closeLocked(context.WithoutCancel(ctx))
		}
	}()
	if d.cp, err = loadCheckpoint(d.s.stateDir); err != nil {
		return connector.Permanent(err)
	}
	if err := d.restore(); err != nil {
		return connector.Permanent(fmt.Errorf("derive: the checkpoint in %s: %w", d.s.stateDir, err))
	}
	d.unsent, d.broken = len(d.cp.Pending) > 0, nil
	if d.s.udaf != "" {
		if d.udaf, err = d.loadUDAF(ctx, d.s.udaf); err != nil {
			return connector.Permanent(fmt.Errorf("derive: udaf %s: %w", d.s.udaf, err))
		}
	}
	if err := d.connect(ctx); err != nil {
		return err
	}
	return d.flush(ctx)
}

// connect dials the output server and learns the output topic's
// partitions, creating the stream and topic when missing.
func (d *Sink) connect(ctx context.Context) error {
	var opts []iggy.Option
	if d.s.token != "" {
		opts = append(opts, iggy.WithToken(d.s.token))
	} else {
		opts = append(opts, iggy.WithCredentials(d.s.user, d.s.pass))
	}
	c, err := iggy.Dial(ctx, d.s.address, opts...)
	if err != nil {
		return connector.Unavailable(fmt.Errorf("derive: connect to %s: %w", d.s.address, err))
	}
	d.client = c
	sid, tid := iggy.NamedID(d.s.toStream), iggy.NamedID(d.s.toTopic)
	td, err := c.GetTopic(ctx, sid, tid)
	if errors.Is(err, iggy.ErrStreamNotFound) || errors.Is(err, iggy.ErrTopicNotFound) {
		if _, err := c.CreateStream(ctx, d.s.toStream); err != nil && !errors.Is(err, iggy.ErrStreamNameAlreadyExists) {
			return fmt.Errorf("derive: create the output stream %s: %w", d.s.toStream, err)
		}
		if _, err := c.CreateTopic(ctx, sid, d.s.toTopic, 1); err != nil && !errors.Is(err, iggy.ErrTopicNameAlreadyExists) {
			return fmt.Errorf("derive: create the output topic %s/%s: %w", d.s.toStream, d.s.toTopic, err)
		}
		td, err = c.GetTopic(ctx, sid, tid)
	}
	if err != nil {
		return fmt.Errorf("derive: the output topic %s/%s: %w", d.s.toStream, d.s.toTopic, err)
	}
	d.partitions = d.partitions[:0]
	for _, p := range td.Partitions {
		d.partitions = append(d.partitions, p.ID)
	}
	if len(d.partitions) == 0 {
		return fmt.Errorf("derive: the output topic %s/%s has no partition", d.s.toStream, d.s.toTopic)
	}
	return nil
}

// Consume applies the batch's messages not applied yet, saves the
// checkpoint, sends the outputs, and returns nil; late or unreadable
// messages come back as Permanent entries of a MessageErrors.
func (d *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken != nil {
		return connector.Unavailable(fmt.Errorf("derive: the sink needs a restart after a failed checkpoint: %w", d.broken))
	}
	if err := d.flush(ctx); err != nil {
		return err
	}
	topic := b.Stream + "/" + b.Topic
	part := topic + "/" + strconv.FormatUint(uint64(b.Partition), 10)
	next, hasNext := d.cp.Next[part]
	failed := connector.MessageErrors{}
	var rejected []rejection
	applied := false
	for i := range b.Messages {
		m := &b.Messages[i]
		if hasNext && m.Offset < next {
			d.stats.Skipped++
			for _, r := range d.cp.Rejected[part] {
				if r.Offset == m.Offset && (!r.Late || d.s.deadLetterLate) {
					failed[i] = connector.Permanent(errors.New(r.Reason))
				}
			}
			continue
		}
		applied = true
		var late bool
		var err error
		if d.s.changelog {
			err = d.applyRow(ctx, topic, m)
		} else {
			late, err = d.apply(ctx, m)
		}
		if err != nil {
			rejected = append(rejected, rejection{Offset: m.Offset, Reason: err.Error(), Late: late})
			if late {
				d.stats.Late++
			} else {
				d.stats.Rejected++
			}
			if !late || d.s.deadLetterLate {
				failed[i] = connector.Permanent(err)
			}
		}
		next, hasNext = m.Offset+1, true
	}
	if applied {
		d.cp.Next[part] = next
		d.cp.Pending = d.emit()
		if d.cp.Rejected == nil {
			d.cp.Rejected = map[string][]rejection{}
		}
		if len(rejected) > 0 {
			d.cp.Rejected[part] = rejected
		} else {
			delete(d.cp.Rejected, part)
		}
		if err := d.cp.save(d.s.stateDir, d.groups, d.rows); err != nil {
			// The groups in memory are ahead of the file: only a reopen,
			// which reads the file again, may go on.
			d.broken = err
			return connector.Unavailable(err)
		}
		d.unsent = len(d.cp.Pending) > 0
		if err := d.flush(ctx); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// restore makes the groups (and rows) of the checkpoint d.cp.
func (d *Sink) restore() error {
	d.groups = make(map[string]*group, len(d.cp.Groups))
	for _, g := range d.cp.Groups {
		if len(g.Aggs) != len(d.s.aggs) && !g.Deleted {
			return fmt.Errorf("it has %d aggregates per group, the configuration %d: "+
				"a changed aggregates list needs a new state_dir (and output topic)", len(g.Aggs), len(d.s.aggs))
		}
		g.outDeleted = g.Deleted
		d.groups[g.id()] = g
	}
	return d.checkInput()
}

// checkInput checks that the checkpoint was made with the configured
// input mode and, with input = "changelog", puts its rows back.
func (d *Sink) checkInput() error {
	used := len(d.cp.Groups) > 0 || len(d.cp.Next) > 0
	if !d.s.changelog {
		if d.cp.Input != "" {
			return fmt.Errorf(`it was made with input = %q: a changed input needs a new state_dir (and output topic)`, d.cp.Input)
		}
		return nil
	}
	if d.cp.Input != "changelog" {
		if used {
			return fmt.Errorf(`it was made with input = "events": a changed input needs a new state_dir (and output topic)`)
		}
		d.cp.Version, d.cp.Input = checkpointVersionChangelog, "changelog"
	}
	return d.rebuild()
}

// apply adds one message to its groups. late reports an event past the
// allowed lateness of all its windows.
func (d *Sink) apply(ctx context.Context, m *connector.Message) (late bool, err error) {
	if v, ok := m.Header(iggy.DeletedHeader); ok && v.Bool() {
		key, ok := m.Header(iggy.KeyHeader)
		if !ok {
			return false, fmt.Errorf("offset %d: a deletion marker without a %q header", m.Offset, iggy.KeyHeader)
		}
		d.deleteKey(keyText(key))
		return false, nil
	}
	var doc any
	if err := json.Unmarshal(m.Payload, &doc); err != nil {
		return false, fmt.Errorf("offset %d: the payload is not JSON: %v", m.Offset, err)
	}
	if d.s.filter != nil && !d.s.filter.match(doc) {
		d.stats.Filtered++
		return false, nil
	}
	key, err := d.groupKey(m, doc)
	if err != nil {
		return false, err
	}
	for i := range d.s.aggs {
		if err := d.s.aggs[i].check(doc); err != nil {
			return false, fmt.Errorf("offset %d: %w", m.Offset, err)
		}
	}
	var windows [][2]int64
	var t int64
	if d.s.window > 0 {
		if t, err = d.eventTime(m, doc); err != nil {
			return false, err
		}
		windows = d.windows(t)
		if len(windows) == 0 {
			return true, fmt.Errorf("offset %d: late: event time %s is past allowed lateness %s of its windows (watermark %s)",
				m.Offset, msTime(t), d.s.lateness, msTime(d.cp.Watermark))
		}
	} else {
		windows = [][2]int64{{0, 0}}
	}
	type change struct {
		g     *group
		udaf  []byte
		fresh bool
	}
	changes := make([]change, 0, len(windows))
	for _, w := range windows {
		g := d.groups[groupID(key, w[0], w[1])]
		fresh := g == nil
		if fresh {
			g = &group{Key: key, Start: w[0], End: w[1]}
		}
		c := change{g: g, fresh: fresh}
		if d.udaf != nil {
			state := g.UDAF
			if state == nil || g.Deleted {
				if state, err = d.udaf.Init(ctx); err != nil {
					return false, fmt.Errorf("offset %d: udaf init: %w", m.Offset, err)
				}
			}
			if c.udaf, err = d.udaf.Add(ctx, state, m.Payload); err != nil {
				return false, fmt.Errorf("offset %d: udaf add: %w", m.Offset, err)
			}
		}
		changes = append(changes, c)
	}
	// Nothing failed: apply to every group.
	for _, c := range changes {
		g := c.g
		if g.Deleted || len(g.Aggs) != len(d.s.aggs) {
			g.Deleted, g.Aggs = false, make([]aggState, len(d.s.aggs))
		}
		for i := range d.s.aggs {
			d.s.aggs[i].add(&g.Aggs[i], doc, m.Payload)
		}
		if d.udaf != nil {
			g.UDAF = c.udaf
		}
		g.changed = true
		if c.fresh {
			d.groups[g.id()] = g
		}
	}
	d.stats.Applied++
	if t > d.cp.Watermark {
		d.cp.Watermark = t
	}
	return false, nil
}

// deleteKey deletes every group of key (a deletion marker on the input).
func (d *Sink) deleteKey(key string) {
	for _, g := range d.groups {
		if g.Key == key && !g.Deleted {
			g.Deleted, g.Aggs, g.UDAF, g.changed = true, nil, nil, true
		}
	}
}

// groupKey is the message's key header, or the group_by field's value
// (a string as it is, other values as JSON).
func (d *Sink) groupKey(m *connector.Message, doc any) (string, error) {
	var key string
	if d.s.groupBy == "" {
		v, ok := m.Header(iggy.KeyHeader)
		if !ok {
			return "", fmt.Errorf("offset %d: no %q header to group by", m.Offset, iggy.KeyHeader)
		}
		key = keyText(v)
	} else {
		v, ok := lookup(doc, d.s.groupBy)
		if !ok || v == nil {
			return "", fmt.Errorf("offset %d: no field %s to group by", m.Offset, d.s.groupBy)
		}
		if s, isStr := v.(string); isStr {
			key = s
		} else {
			b, _ := json.Marshal(v)
			key = string(b)
		}
	}
	if key == "" || len(key) > maxKey {
		return "", fmt.Errorf("offset %d: group key of %d bytes: want 1 to %d", m.Offset, len(key), maxKey)
	}
	if !utf8.ValidString(key) {
		// It is the output's key header and a JSON string of its payload
		// and of the checkpoint, which would change it.
		return "", fmt.Errorf("offset %d: group key %q is not UTF-8 text", m.Offset, key)
	}
	return key, nil
}

// keyText is a key header's value: a string, or raw bytes as they are.
func keyText(v connector.HeaderValue) string {
	if s, ok := v.Text(); ok {
		return s
	}
	if v.Kind == header.KindRaw {
		return string(v.Data)
	}
	return v.String()
}

// maxKey bounds a group key, so the key header (key@window) stays within
// Iggy's 255 bytes per header value.
const maxKey = 200

// eventTime is the event_time field (RFC 3339 or Unix milliseconds),
// else the message's origin timestamp, else when it was appended.
func (d *Sink) eventTime(m *connector.Message, doc any) (int64, error) {
	if d.s.eventTime == "" {
		if !m.OriginTimestamp.IsZero() && m.OriginTimestamp.Unix() > 0 {
			return m.OriginTimestamp.UnixMilli(), nil
		}
		return m.Timestamp.UnixMilli(), nil
	}
	v, ok := lookup(doc, d.s.eventTime)
	switch x := v.(type) {
	case float64:
		if x > -1e15 && x < 1e15 {
			return int64(x), nil
		}
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UnixMilli(), nil
		}
	}
	if !ok {
		return 0, fmt.Errorf("offset %d: no event time field %s", m.Offset, d.s.eventTime)
	}
	return 0, fmt.Errorf("offset %d: event time field %s: want an RFC 3339 time or Unix milliseconds, got %s", m.Offset, d.s.eventTime, shortJSON(v))
}

// windows are the open windows holding event time t: [start, end) in
// Unix milliseconds, oldest first.
func (d *Sink) windows(t int64) [][2]int64 {
	size, hop, late := d.s.window.Milliseconds(), d.s.hop.Milliseconds(), d.s.lateness.Milliseconds()
	last := t - mod(t, hop)
	var out [][2]int64
	for start := last - size + hop; start <= last; start += hop {
		if start+size+late > d.cp.Watermark {
			out = append(out, [2]int64{start, start + size})
		}
	}
	return out
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// closed reports a window past its allowed lateness.
func (d *Sink) closed(g *group) bool {
	return d.s.window > 0 && g.End+d.s.lateness.Milliseconds() <= d.cp.Watermark
}

// Close closes the connection, the udaf and the state lock.
func (d *Sink) Close(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeLocked(ctx)
}

func (d *Sink) closeLocked(ctx context.Context) error {
	var err error
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
	if d.udaf != nil {
		err = d.udaf.Close(ctx)
		d.udaf = nil
	}
	if d.lock != nil {
		if lerr := d.lock.Close(); err == nil {
			err = lerr
		}
		d.lock = nil
	}
	return err
}

// Stats returns the counters since Open.
func (d *Sink) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

var (
	_ connector.Sink   = (*Sink)(nil)
	_ connector.Viewer = (*Sink)(nil)
)
var _ Aggregator = (*udaf.Module)(nil)
