package redis

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	goredis "github.com/redis/go-redis/v9"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "redis",
		Summary:   "reads a Redis stream through a consumer group (XACK once in Iggy) or a list with a reliable LMOVE",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// Source is the redis source.
//
// Streams mode reads the stream with XREADGROUP as client_id of
// consumer_group. On Open it first reads this consumer's own pending
// entries (from id 0: read by an earlier run, never acknowledged), then
// new ones (>); with min_idle_time it also claims entries other
// consumers left pending that long (XAUTOCLAIM). A batch's entries are
// acknowledged (XACK) in Ack, after the batch is in Iggy. A message's id
// is its entry id (milliseconds and sequence, big-endian), so an entry
// read again after a crash carries the same id.
//
// Lists mode moves items from the list to the processing list (LMOVE,
// BLMOVE when the list is empty) and removes them from there (LREM) in
// Ack. On Open the items already in the processing list (a crash before
// their Ack) are delivered first. List items have no id: Iggy assigns one.
type Source struct {
	url, safeURL       string
	mode               string
	stream, group      string
	consumer           string
	create, oldest     bool
	bodyKey            string
	minIdle            time.Duration
	list, processing   string
	batchSize          int
	block, timeout     time.Duration
	schema             connector.Schema
	log                *slog.Logger
	client             *goredis.Client
	cursor             string // streams: "0"-based id while reading our pending entries, then ">"
	claimAt, lastClaim string
	lastClaimTime      time.Time
	recovered          []string // lists: items found in the processing list at Open

	mu      sync.Mutex
	pending map[*connector.Batch][]string // stream entry ids or list items of each unacknowledged batch
}

// NewSource builds a redis source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		url: set.String("url"), mode: set.String("mode"), stream: set.String("stream"), group: set.String("consumer_group"),
		consumer: set.String("client_id"), create: set.Bool("create_streams"), oldest: set.Bool("start_from_oldest"),
		bodyKey: set.String("body_key"), minIdle: set.Duration("min_idle_time"), list: set.String("key"),
		batchSize: set.Int("batch_size"), block: set.Duration("block"), timeout: set.Duration("timeout"),
		schema: connector.Schema(set.String("schema")), log: log, pending: map[*connector.Batch][]string{},
	}
	s.processing = s.list + ":processing"
	if set.Has("processing_key") {
		s.processing = set.String("processing_key")
	}
	s.safeURL = safeURL(s.url)
	return s, nil
}

// Open connects, creates the group when asked, and finds what an earlier
// run left unacknowledged. The state is unused: Redis keeps the position
// (the group's pending entries, the processing list).
func (s *Source) Open(ctx context.Context, _ []byte) error {
	opt, err := options(s.url, s.timeout)
	if err != nil {
		return err
	}
	s.client = goredis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	fail := func(err error) error {
		_ = s.client.Close()
		s.client = nil
		return err
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fail(fmt.Errorf("connect to %s: %w", s.safeURL, err))
	}
	if s.mode == modeLists {
		items, err := s.client.LRange(ctx, s.processing, 0, -1).Result()
		if err != nil {
			return fail(fmt.Errorf("read processing list %q on %s: %w", s.processing, s.safeURL, err))
		}
		s.recovered = items
		if len(items) > 0 {
			s.log.Info("items a previous run did not acknowledge are delivered again", "processing_key", s.processing, "items", len(items))
		}
		return nil
	}
	if s.create {
		start := "0"
		if !s.oldest {
			start = "$"
		}
		err := s.client.XGroupCreateMkStream(ctx, s.stream, s.group, start).Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fail(fmt.Errorf("create consumer group %q of stream %q on %s: %w", s.group, s.stream, s.safeURL, err))
		}
	}
	s.cursor, s.claimAt = "0", "0-0"
	return nil
}

// Poll returns the next batch: pending entries or recovered items first,
// then new ones, waiting up to block for them at a time until ctx ends.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var b *connector.Batch
		var err error
		if s.mode == modeLists {
			b, err = s.pollList(ctx)
		} else {
			b, err = s.pollStream(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
				return nil, context.DeadlineExceeded // the read's deadline was ctx's
			}
			return nil, err
		}
		if b != nil {
			return b, nil
		}
	}
}

func (s *Source) remember(b *connector.Batch, keys []string) *connector.Batch {
	s.mu.Lock()
	s.pending[b] = keys
	s.mu.Unlock()
	return b
}

// pollStream reads once; nil when nothing came within block.
func (s *Source) pollStream(ctx context.Context) (*connector.Batch, error) {
	if s.minIdle > 0 && s.cursor == ">" && time.Since(s.lastClaimTime) >= s.minIdle/2 {
		s.lastClaimTime = time.Now()
		msgs, next, err := s.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{Stream: s.stream, Group: s.group, Consumer: s.consumer,
			MinIdle: s.minIdle, Start: s.claimAt, Count: int64(s.batchSize)}).Result()
		if err != nil {
			return nil, fmt.Errorf("XAUTOCLAIM on stream %q on %s: %w", s.stream, s.safeURL, err)
		}
		s.claimAt = next
		if b := s.streamBatch(ctx, msgs); b != nil {
			return b, nil
		}
	}
	args := &goredis.XReadGroupArgs{Group: s.group, Consumer: s.consumer, Streams: []string{s.stream, s.cursor},
		Count: int64(s.batchSize), Block: -1}
	if s.cursor == ">" {
		args.Block = s.block
	}
	res, err := s.client.XReadGroup(ctx, args).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		cursor := s.cursor
		if cursor == ">" {
			// The server may have handed entries to this consumer before
			// the read failed or was cancelled: they are pending now, and
			// only a read of our pending entries gets them.
			s.cursor = "0"
		}
		return nil, fmt.Errorf("XREADGROUP %s of group %q on stream %q on %s: %w", cursor, s.group, s.stream, s.safeURL, err)
	}
	var msgs []goredis.XMessage
	for _, r := range res {
		msgs = append(msgs, r.Messages...)
	}
	if s.cursor != ">" {
		if len(msgs) == 0 {
			s.cursor = ">" // our pending entries are all read again; now new ones
			return nil, nil
		}
		s.cursor = msgs[len(msgs)-1].ID
		msgs = s.notInFlight(msgs)
		if len(msgs) == 0 {
			return nil, nil
		}
	}
	return s.streamBatch(ctx, msgs), nil
}

// notInFlight drops the entries of batches polled and not yet
// acknowledged: a read of our pending entries returns them too.
func (s *Source) notInFlight(msgs []goredis.XMessage) []goredis.XMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return msgs
	}
	inFlight := map[string]bool{}
	for _, ids := range s.pending {
		for _, id := range ids {
			inFlight[id] = true
		}
	}
	out := msgs[:0]
	for _, m := range msgs {
		if !inFlight[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// streamBatch is the batch of msgs; entries deleted since they were read
// (no fields) and entries whose body is empty (Iggy refuses empty
// payloads, and such a message could not even be dead-lettered) are
// acknowledged at once and left out.
func (s *Source) streamBatch(ctx context.Context, msgs []goredis.XMessage) *connector.Batch {
	b := &connector.Batch{Schema: s.schema}
	var ids, gone []string
	empty := 0
	for _, x := range msgs {
		if len(x.Values) == 0 {
			gone = append(gone, x.ID)
			continue
		}
		m := s.streamMessage(x)
		if len(m.Payload) == 0 {
			gone = append(gone, x.ID)
			empty++
			continue
		}
		b.Messages = append(b.Messages, m)
		ids = append(ids, x.ID)
	}
	if empty > 0 {
		s.log.Warn("entries with an empty body passed over (Iggy refuses empty payloads)", "stream", s.stream, "body_key", s.bodyKey, "entries", empty)
	}
	if len(gone) > 0 {
		if err := s.client.XAck(ctx, s.stream, s.group, gone...).Err(); err != nil {
			s.log.Warn("acknowledge deleted or empty entries (they will be read again and passed over)", "stream", s.stream, "error", err)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return s.remember(b, ids)
}

// streamMessage is the Iggy message of an entry.
func (s *Source) streamMessage(x goredis.XMessage) connector.Message {
	m := connector.Message{ID: entryID(x.ID)}
	if body, ok := x.Values[s.bodyKey]; ok {
		m.Payload = []byte(fmt.Sprint(body))
	} else {
		m.Payload, _ = json.Marshal(x.Values) // a map of strings: sorted keys, never fails
	}
	keys := make([]string, 0, len(x.Values))
	for k := range x.Values {
		if k != s.bodyKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := fmt.Sprint(x.Values[k]); fitsIggy(k, v) {
			m.Headers = append(m.Headers, connector.StringHeader(k, v))
		}
	}
	m.Headers = append(m.Headers, connector.StringHeader("redis_stream_id", x.ID))
	if ms, _, ok := strings.Cut(x.ID, "-"); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > 0 {
			m.OriginTimestamp = time.UnixMilli(n)
		}
	}
	return m
}

// entryID is the message id of stream entry id "ms-seq": ms and seq as
// two big-endian uint64s.
func entryID(id string) [16]byte {
	var out [16]byte
	ms, seq, _ := strings.Cut(id, "-")
	a, _ := strconv.ParseUint(ms, 10, 64)
	b, _ := strconv.ParseUint(seq, 10, 64)
	binary.BigEndian.PutUint64(out[:8], a)
	binary.BigEndian.PutUint64(out[8:], b)
	return out
}

// fitsIggy reports whether a header key and value fit Iggy's limits.
func fitsIggy(key, value string) bool {
	return len(key) >= 1 && len(key) <= 255 && len(value) >= 1 && len(value) <= 255
}

// pollList moves up to batch_size items to the processing list; nil when
// none came within block.
func (s *Source) pollList(ctx context.Context) (*connector.Batch, error) {
	var items []string
	if len(s.recovered) > 0 {
		n := min(len(s.recovered), s.batchSize)
		items, s.recovered = s.recovered[:n], s.recovered[n:]
	} else {
		// BLMOVE through Do: go-redis's BLMove rounds a timeout up to whole
		// seconds, Redis takes milliseconds (a decimal).
		first, err := s.client.Do(ctx, "BLMOVE", s.list, s.processing, "LEFT", "RIGHT",
			strconv.FormatFloat(s.block.Seconds(), 'f', 3, 64)).Text()
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("BLMOVE from list %q to %q on %s: %w", s.list, s.processing, s.safeURL, err)
		}
		items = append(items, first)
		if s.batchSize > 1 {
			cmds, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for range s.batchSize - 1 {
					p.LMove(ctx, s.list, s.processing, "LEFT", "RIGHT")
				}
				return nil
			})
			if err != nil && !errors.Is(err, goredis.Nil) {
				// What was moved is in the processing list: delivered
				// after the restart this error leads to.
				return nil, fmt.Errorf("LMOVE from list %q to %q on %s: %w", s.list, s.processing, s.safeURL, err)
			}
			for _, c := range cmds {
				if v, err := c.(*goredis.StringCmd).Result(); err == nil {
					items = append(items, v)
				}
			}
		}
	}
	// Empty items are removed from the processing list at once and left
	// out: Iggy refuses empty payloads, and such a message could not even
	// be dead-lettered.
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, 0, len(items))}
	kept := items[:0:0]
	empty := 0
	for _, it := range items {
		if it == "" {
			empty++
			continue
		}
		b.Messages = append(b.Messages, connector.Message{Payload: []byte(it)})
		kept = append(kept, it)
	}
	if empty > 0 {
		s.log.Warn("empty items passed over (Iggy refuses empty payloads)", "key", s.list, "items", empty)
		if err := s.client.LRem(ctx, s.processing, int64(empty), "").Err(); err != nil {
			s.log.Warn("remove empty items from the processing list (they will be read again and passed over)",
				"processing_key", s.processing, "error", err)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	return s.remember(b, kept), nil
}

func (s *Source) take(b *connector.Batch) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, ok := s.pending[b]
	delete(s.pending, b)
	return keys, ok
}

// Ack acknowledges the batch's entries (XACK) or removes its items from
// the processing list, once the batch is in Iggy.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	keys, ok := s.take(b)
	if !ok || len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.mode == modeStreams {
		if err := s.client.XAck(ctx, s.stream, s.group, keys...).Err(); err != nil {
			return fmt.Errorf("XACK %d entries of stream %q on %s (they will be read again): %w", len(keys), s.stream, s.safeURL, err)
		}
		return nil
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.LRem(ctx, s.processing, 1, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove %d items from processing list %q on %s (they will be delivered again): %w", len(keys), s.processing, s.safeURL, err)
	}
	return nil
}

// Nack keeps the batch unacknowledged: the runtime sends the same batch
// again and acknowledges it then.
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Debug("batch not yet in Iggy; it stays unacknowledged", "messages", len(b.Messages), "cause", cause)
}

// Close closes the client; what was not acknowledged stays pending.
func (s *Source) Close(context.Context) error {
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	return err
}
