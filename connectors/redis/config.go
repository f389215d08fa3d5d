package redis

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	goredis "github.com/redis/go-redis/v9"
)

// Sink modes.
const (
	modeStreams = "streams"
	modeLists   = "lists"
	modePubSub  = "pubsub"
	modeKeys    = "keys"
)

// Entry id choices of the streams mode.
const (
	entryIDOffset = "offset"
	entryIDAuto   = "auto"
)

func urlField() connector.Field {
	return connector.NewStringField("url").AsSecret().WithDefault("redis://localhost:6379/0").WithCheck(checkURL).
		WithDoc("the server: redis://[user:password@]host:port/db or rediss:// for TLS (a secret: it may hold a password)")
}

func timeoutField() connector.Field {
	return connector.NewDurationField("timeout").WithDefault(30 * time.Second).
		WithDoc("connect, read and write timeout of one command or pipeline")
}

// SinkSpec is the sink's plugin_config. Redis has no upstream Iggy
// connector: the keys are Ferry's, named as Redpanda Connect's redis
// outputs name them (url, stream, key, channel, body_key, max_length).
var SinkSpec = connector.NewSpec(
	urlField(),
	connector.NewEnumField("mode", modeStreams, modeLists, modePubSub, modeKeys).WithDefault(modeStreams).
		WithDoc("streams: XADD to a stream; lists: RPUSH to a list; pubsub: PUBLISH to a channel (fire-and-forget); keys: SET the message key"),
	connector.NewStringField("stream").WithDefault("iggy:{stream}:{topic}:{partition}").
		WithDoc("streams mode: the stream written, a template of {stream}, {topic} and {partition}; with entry_id = \"offset\" it must use all three"),
	connector.NewEnumField("entry_id", entryIDOffset, entryIDAuto).WithDefault(entryIDOffset).
		WithDoc("streams mode: offset = the entry id is <offset+1>-<partition>, so a replayed batch adds nothing; auto = Redis picks (*), and a replay adds its entries again"),
	connector.NewStringField("body_key").WithDefault("body").WithDoc("streams mode: the entry field holding the payload"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("streams mode: add the fields iggy_stream, iggy_topic, iggy_partition, iggy_offset and iggy_id"),
	connector.NewBoolField("include_headers").WithDefault(true).
		WithDoc("streams mode: add each user header as a field, its key prefixed with header:"),
	connector.NewIntField("max_length").AtLeast(0).WithDefault(0).
		WithDoc("streams mode: trim the stream to about this many entries (XADD MAXLEN ~); 0 = never trim"),
	connector.NewStringField("key").WithDoc("lists mode: the list, a template of {stream}, {topic} and {partition} (default iggy:{stream}:{topic}); "+
		"keys mode: the key SET, a template that must use {key}, the message key (the \"key\" header), and may use the others (default {key})"),
	connector.NewStringField("channel").WithDefault("iggy:{stream}:{topic}").
		WithDoc("pubsub mode: the channel, a template of {stream}, {topic} and {partition}"),
	connector.NewDurationField("ttl").WithDefault(time.Duration(0)).WithDoc("keys mode: each key expires this long after it was set; 0 = never"),
	timeoutField(),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	mode := s.String("mode")
	check := func(name, value string, allowKey bool) {
		if _, err := parseTemplate(value, allowKey); err != nil {
			fail(name, "%v", err)
		}
	}
	switch mode {
	case modeStreams:
		check("stream", s.String("stream"), false)
		if s.String("entry_id") == entryIDOffset {
			for _, p := range []string{"{stream}", "{topic}", "{partition}"} {
				if !strings.Contains(s.String("stream"), p) {
					fail("stream", "%q does not use %s: with entry_id = \"offset\" each Iggy partition needs a stream of its own, "+
						"or the entry ids of two partitions would collide (set entry_id = \"auto\" to share a stream)", s.String("stream"), p)
				}
			}
		}
		if s.String("body_key") == "" {
			fail("body_key", "is empty")
		}
	case modeLists:
		if s.Has("key") {
			check("key", s.String("key"), false)
		}
	case modePubSub:
		check("channel", s.String("channel"), false)
	case modeKeys:
		if s.Has("key") {
			check("key", s.String("key"), true)
			if !strings.Contains(s.String("key"), "{key}") {
				fail("key", "%q does not use {key}: in keys mode every message would overwrite one key", s.String("key"))
			}
		}
	}
	if s.Duration("ttl") < 0 {
		fail("ttl", "is negative")
	} else if s.Duration("ttl") > 0 && s.Duration("ttl") < time.Millisecond {
		fail("ttl", "is below Redis's resolution of 1ms")
	}
})

// SourceSpec is the source's plugin_config (Ferry's keys, named as
// Redpanda Connect's redis_streams and redis_list inputs name them).
var SourceSpec = connector.NewSpec(
	urlField(),
	connector.NewEnumField("mode", modeStreams, modeLists).WithDefault(modeStreams).
		WithDoc("streams: read a stream through a consumer group; lists: move items to a processing list (LMOVE) and remove them once in Iggy"),
	connector.NewStringField("stream").WithExample("orders").WithDoc("streams mode: the stream read (required in that mode)"),
	connector.NewStringField("consumer_group").WithDefault("ferry").WithDoc("streams mode: the consumer group"),
	connector.NewStringField("client_id").WithDefault("ferry").
		WithDoc("streams mode: this consumer's name in the group; keep it across restarts, or its pending entries wait for min_idle_time"),
	connector.NewBoolField("create_streams").WithDefault(true).WithDoc("streams mode: create the stream and the group when missing"),
	connector.NewBoolField("start_from_oldest").WithDefault(true).
		WithDoc("streams mode: a group created by Ferry starts at the stream's first entry; false: at entries added after"),
	connector.NewStringField("body_key").WithDefault("body").
		WithDoc("streams mode: the field whose value is the payload; an entry without it is sent as a JSON object of all its fields"),
	connector.NewDurationField("min_idle_time").WithDefault(time.Duration(0)).
		WithDoc("streams mode: also claim (XAUTOCLAIM) entries other consumers of the group left pending this long; 0 = never"),
	connector.NewStringField("key").WithExample("jobs").WithDoc("lists mode: the list popped (required in that mode)"),
	connector.NewStringField("processing_key").
		WithDoc("lists mode: the list items wait in until they are in Iggy (default <key>:processing); one source per processing list"),
	connector.NewIntField("batch_size").Between(1, 100000).WithDefault(100).WithDoc("most messages per batch"),
	connector.NewDurationField("block").WithDefault(time.Second).
		WithDoc("how long one read waits for data when there is none (XREADGROUP BLOCK, BLMOVE timeout)"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("the payloads' format in Iggy"),
	timeoutField(),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	switch s.String("mode") {
	case modeStreams:
		if s.String("stream") == "" {
			fail("stream", "is required in streams mode")
		}
		if s.String("consumer_group") == "" {
			fail("consumer_group", "is empty")
		}
		if s.String("client_id") == "" {
			fail("client_id", "is empty")
		}
	case modeLists:
		if s.String("key") == "" {
			fail("key", "is required in lists mode")
		}
		if s.Has("processing_key") && s.String("processing_key") == s.String("key") {
			fail("processing_key", "is the list read itself")
		}
	}
	if s.Duration("block") < time.Millisecond {
		fail("block", "is below 1ms")
	}
})

func checkURL(v any) error {
	s, _ := v.(string)
	if _, err := goredis.ParseURL(s); err != nil {
		return fmt.Errorf("expected a redis:// or rediss:// URL: %s", strings.ReplaceAll(err.Error(), s, safeURL(s)))
	}
	return nil
}

// safeURL is u without its credentials, for logs and errors.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.String()
}

// options are the client options for url.
func options(raw string, timeout time.Duration) (*goredis.Options, error) {
	opt, err := goredis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	opt.MaxRetries = -1 // the runtime retries whole batches; a pipeline retried inside go-redis could run twice
	opt.PoolSize = 4
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// template is a name such as "iggy:{stream}:{topic}:{partition}".
type template struct{ parts []tmplPart }

type tmplPart struct{ lit, ph string }

func parseTemplate(s string, allowKey bool) (template, error) {
	var t template
	if s == "" {
		return t, fmt.Errorf("is empty")
	}
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			t.parts = append(t.parts, tmplPart{lit: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tmplPart{lit: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return t, fmt.Errorf("%q: a { without its }", s)
		}
		name := s[i+1 : i+j]
		switch {
		case name == "stream" || name == "topic" || name == "partition":
		case name == "key" && allowKey:
		case name == "key":
			return t, fmt.Errorf("{key} is allowed only in keys mode's key: names come from the configuration, not from messages")
		default:
			return t, fmt.Errorf("unknown placeholder {%s} (use {stream}, {topic}, {partition})", name)
		}
		t.parts = append(t.parts, tmplPart{ph: name})
		s = s[i+j+1:]
	}
	return t, nil
}

// expand fills the template; key is the message key (keys mode).
func (t template) expand(b *connector.SinkBatch, key []byte) string {
	var sb strings.Builder
	for _, p := range t.parts {
		switch p.ph {
		case "":
			sb.WriteString(p.lit)
		case "stream":
			sb.WriteString(b.Stream)
		case "topic":
			sb.WriteString(b.Topic)
		case "partition":
			sb.WriteString(strconv.FormatUint(uint64(b.Partition), 10))
		case "key":
			sb.Write(key)
		}
	}
	return sb.String()
}

func (t template) usesKey() bool {
	for _, p := range t.parts {
		if p.ph == "key" {
			return true
		}
	}
	return false
}
