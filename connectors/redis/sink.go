package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "redis",
		Summary: "writes messages to Redis streams (idempotent XADD), lists, pub/sub channels or keys before the offset is committed",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// Sink is the redis sink.
type Sink struct {
	url, safeURL string
	mode         string
	name         template // the stream, list, channel or key
	autoID       bool
	bodyKey      string
	metadata     bool
	headers      bool
	maxLen       int64
	ttl          time.Duration
	timeout      time.Duration
	log          *slog.Logger

	client *goredis.Client
}

// NewSink builds a redis sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		url: set.String("url"), mode: set.String("mode"), autoID: set.String("entry_id") == entryIDAuto,
		bodyKey: set.String("body_key"), metadata: set.Bool("include_metadata"), headers: set.Bool("include_headers"),
		maxLen: int64(set.Int("max_length")), ttl: set.Duration("ttl"), timeout: set.Duration("timeout"), log: log,
	}
	s.safeURL = safeURL(s.url)
	name, key := "", "key"
	switch s.mode {
	case modeStreams:
		name, key = set.String("stream"), "stream"
	case modeLists:
		name = "iggy:{stream}:{topic}"
	case modePubSub:
		name, key = set.String("channel"), "channel"
	case modeKeys:
		name = "{key}"
	}
	if (s.mode == modeLists || s.mode == modeKeys) && set.Has("key") {
		name = set.String("key")
	}
	if s.name, err = parseTemplate(name, s.mode == modeKeys); err != nil {
		return nil, set.Errorf(key, "%v", err)
	}
	return s, nil
}

// Open connects and checks the server answers. A server that is down
// makes Open fail, and the runtime retries it with backoff.
func (s *Sink) Open(ctx context.Context) error {
	opt, err := options(s.url, s.timeout)
	if err != nil {
		return err
	}
	opt.PoolSize = 2
	s.client = goredis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		_ = s.client.Close()
		s.client = nil
		return connector.Unavailable(fmt.Errorf("connect to %s: %w", s.safeURL, err))
	}
	return nil
}

// Close closes the client.
func (s *Sink) Close(context.Context) error {
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	return err
}

// Consume writes the batch and returns when Redis answered every write
// (see the package doc for what each mode does on a replay).
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if len(b.Messages) == 0 {
		return nil
	}
	if s.client == nil {
		return connector.Unavailable(errors.New("the sink is not open"))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var err error
	switch s.mode {
	case modeStreams:
		err = s.xadd(ctx, b)
	case modeLists:
		err = s.rpush(ctx, b)
	case modePubSub:
		err = s.publish(ctx, b)
	case modeKeys:
		err = s.setKeys(ctx, b)
	}
	if err == nil {
		s.log.Debug("wrote batch", "mode", s.mode, "stream", b.Stream, "topic", b.Topic, "partition", b.Partition, "messages", len(b.Messages))
	}
	return err
}

// xaddScript adds the entries of one batch to one stream, in order, and
// stops at the first write that fails. An entry whose explicit id is not
// above the stream's last id is skipped as already written: the sink's
// ids grow with the offset within a stream only this partition writes,
// and a batch stops at its first failure, so every id up to the last one
// is one this script wrote before (a replay). ARGV: max length, then per
// entry its id, its field count and its fields and values. Returns
// {written, skipped}, or an error "FERRY <index> <Redis's error>".
var xaddScript = goredis.NewScript(`
local maxlen = tonumber(ARGV[1])
local i, k = 2, 0
local written, skipped = 0, 0
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  local args = {'XADD', KEYS[1]}
  if maxlen > 0 then
    args[#args + 1] = 'MAXLEN'; args[#args + 1] = '~'; args[#args + 1] = maxlen
  end
  args[#args + 1] = ARGV[i]
  for j = 1, n do args[#args + 1] = ARGV[i + 1 + j] end
  local r = redis.pcall(unpack(args))
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'equal or smaller', 1, true) then
      skipped = skipped + 1
    else
      return redis.error_reply('FERRY ' .. k .. ' ' .. r.err)
    end
  else
    written = written + 1
  end
  i = i + 2 + n
  k = k + 1
end
return {written, skipped}
`)

// xadd writes a batch to its stream through xaddScript.
func (s *Sink) xadd(ctx context.Context, b *connector.SinkBatch) error {
	stream := s.name.expand(b, nil)
	args := make([]any, 0, 1+len(b.Messages)*16)
	args = append(args, s.maxLen)
	failed := connector.MessageErrors{}
	index := make([]int, 0, len(b.Messages)) // script entry → batch index
	for i := range b.Messages {
		m := &b.Messages[i]
		id := "*"
		if !s.autoID {
			if m.Offset == math.MaxUint64 {
				failed[i] = connector.Permanent(errors.New("offset 2^64-1 has no stream entry id <offset+1>-<partition>"))
				continue
			}
			id = strconv.FormatUint(m.Offset+1, 10) + "-" + strconv.FormatUint(uint64(b.Partition), 10)
		}
		fields := s.fields(b, m)
		args = append(args, id, len(fields))
		for _, f := range fields {
			args = append(args, f)
		}
		index = append(index, i)
	}
	if len(index) == 0 {
		return failed
	}
	res, err := xaddScript.Run(ctx, s.client, []string{stream}, args...).Int64Slice()
	if err != nil {
		k, reason := scriptFailure(err)
		if k < 0 || k >= len(index) || !isServerError(reason) || isUnavailable(reason) {
			return connector.Unavailable(fmt.Errorf("XADD to stream %q on %s: %w", stream, s.safeURL, reason))
		}
		// The entries before k are written; from k on the same command on
		// the same stream would fail the same way.
		for _, i := range index[k:] {
			failed[i] = connector.Permanent(fmt.Errorf("Redis refused XADD to stream %q: %w", stream, reason))
		}
		return failed
	}
	if len(res) == 2 && res[1] > 0 {
		s.log.Debug("entries already in the stream skipped (a replay)", "stream", stream, "skipped", res[1], "written", res[0])
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// fields are an entry's fields and values, in a fixed order.
func (s *Sink) fields(b *connector.SinkBatch, m *connector.Message) []any {
	f := make([]any, 0, 12+2*len(m.Headers))
	f = append(f, s.bodyKey, m.Payload)
	if s.metadata {
		f = append(f, "iggy_stream", b.Stream, "iggy_topic", b.Topic, "iggy_partition", strconv.FormatUint(uint64(b.Partition), 10),
			"iggy_offset", strconv.FormatUint(m.Offset, 10), "iggy_id", uuid.UUID(m.ID).String())
	}
	if s.headers {
		for _, h := range m.Headers {
			f = append(f, "header:"+h.Key.String(), headerText(h.Value))
		}
	}
	return f
}

// headerText is a header value as a stream field: strings and raw bytes
// as they are, other kinds as Ferry prints them.
func headerText(v header.Value) []byte {
	if v.Kind == header.KindString || v.Kind == header.KindRaw {
		return v.Data
	}
	return []byte(v.String())
}

// rpush appends the batch to its list in one RPUSH: all or nothing.
func (s *Sink) rpush(ctx context.Context, b *connector.SinkBatch) error {
	list := s.name.expand(b, nil)
	vals := make([]any, len(b.Messages))
	for i := range b.Messages {
		vals[i] = b.Messages[i].Payload
	}
	if err := s.client.RPush(ctx, list, vals...).Err(); err != nil {
		return s.whole(b, fmt.Errorf("RPUSH to list %q on %s: %w", list, s.safeURL, err), err)
	}
	return nil
}

// publish sends each message to its channel, pipelined.
func (s *Sink) publish(ctx context.Context, b *connector.SinkBatch) error {
	channel := s.name.expand(b, nil)
	cmds, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range b.Messages {
			p.Publish(ctx, channel, b.Messages[i].Payload)
		}
		return nil
	})
	return s.perCommand(b, connector.MessageErrors{}, cmds, nil, err, "PUBLISH to channel "+strconv.Quote(channel))
}

// setKeys sets (or, for a deletion marker, deletes) each message's key,
// pipelined in offset order.
func (s *Sink) setKeys(ctx context.Context, b *connector.SinkBatch) error {
	failed := connector.MessageErrors{}
	index := make([]int, 0, len(b.Messages))
	cmds, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range b.Messages {
			m := &b.Messages[i]
			k, ok := messageKey(m)
			if !ok {
				failed[i] = connector.Permanent(fmt.Errorf("the message has no %q header with a string or raw value: keys mode has no key to set", iggy.KeyHeader))
				continue
			}
			key := s.name.expand(b, k)
			if deleted(m) {
				p.Del(ctx, key)
			} else {
				p.Set(ctx, key, m.Payload, s.ttl)
			}
			index = append(index, i)
		}
		return nil
	})
	if len(index) == 0 {
		return failed
	}
	return s.perCommand(b, failed, cmds, index, err, "SET/DEL of message keys")
}

// messageKey is the message key: the "key" header's string or raw bytes,
// as package live and iggy.Message.Key define it.
func messageKey(m *connector.Message) ([]byte, bool) {
	v, ok := m.Header(iggy.KeyHeader)
	if !ok || (v.Kind != header.KindString && v.Kind != header.KindRaw) || len(v.Data) == 0 {
		return nil, false
	}
	return v.Data, true
}

// deleted reports a deletion marker: the iggy.DeletedHeader set to bool
// true, as package live's Target sends them.
func deleted(m *connector.Message) bool {
	v, ok := m.Header(iggy.DeletedHeader)
	return ok && v.Bool()
}

// perCommand turns a pipeline's answers into the batch's result, adding
// to failed (the messages refused before sending). index maps commands
// to messages (nil: one command per message).
func (s *Sink) perCommand(b *connector.SinkBatch, failed connector.MessageErrors, cmds []goredis.Cmder, index []int, err error, what string) error {
	if err != nil && len(cmds) == 0 {
		return s.whole(b, fmt.Errorf("%s on %s: %w", what, s.safeURL, err), err)
	}
	for k, c := range cmds {
		i := k
		if index != nil {
			i = index[k]
		}
		cerr := c.Err()
		if cerr == nil {
			continue
		}
		if !isServerError(cerr) || isUnavailable(cerr) {
			return connector.Unavailable(fmt.Errorf("%s on %s: %w", what, s.safeURL, cerr))
		}
		failed[i] = connector.Permanent(fmt.Errorf("Redis refused %s: %w", what, cerr))
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// whole is the result of a command that covered the whole batch: a
// refusal of the server fails every message for good; anything else
// (the connection, a loading or read-only server) is Unavailable.
func (s *Sink) whole(b *connector.SinkBatch, wrapped, cause error) error {
	if !isServerError(cause) || isUnavailable(cause) {
		return connector.Unavailable(wrapped)
	}
	failed := connector.MessageErrors{}
	for i := range b.Messages {
		failed[i] = connector.Permanent(wrapped)
	}
	return failed
}

// scriptFailure splits xaddScript's "FERRY <index> <error>" error.
func scriptFailure(err error) (int, error) {
	var re goredis.Error
	if !errors.As(err, &re) {
		return -1, err
	}
	msg := re.Error()
	i := strings.Index(msg, "FERRY ")
	if i < 0 {
		return -1, err
	}
	rest := msg[i+len("FERRY "):]
	num, reason, ok := strings.Cut(rest, " ")
	k, perr := strconv.Atoi(num)
	if !ok || perr != nil {
		return -1, err
	}
	return k, serverError(reason)
}

// serverError is an error Redis answered, rebuilt from its text.
type serverError string

func (e serverError) Error() string { return string(e) }
func (e serverError) RedisError()   {}

// isServerError reports an error Redis answered (rather than a lost or
// refused connection or a timeout).
func isServerError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && !errors.Is(err, goredis.Nil)
}

// unavailablePrefixes are the answers of a server that cannot take
// writes now but will: loading its data, a busy script, a replica, out
// of memory, a cluster reconfiguring.
var unavailablePrefixes = []string{"LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN",
	"OOM", "NOREPLICAS", "MISCONF", "ERR max number of clients"}

func isUnavailable(err error) bool {
	msg := err.Error()
	for _, p := range unavailablePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
