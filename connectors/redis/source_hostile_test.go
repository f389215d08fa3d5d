package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// tomlString quotes s as a TOML basic string (control characters,
// NUL among them, as \uXXXX).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hostilePayloads are bodies that look like RESP commands, Lua, globs
// and templates, or are binary (every byte value, NUL, invalid UTF-8),
// or large.
func hostilePayloads() []string {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return []string{
		"*1\r\n$8\r\nFLUSHALL\r\n",
		"*3\r\n$3\r\nDEL\r\n$6\r\ncanary\r\n",
		"'); redis.call('FLUSHALL') --",
		"{stream}{key}* ? [a-z] \\",
		"\x00",
		"a\x00b\x00\xff\xfe not utf-8",
		string(all),
		"\u202e\u00fc\u65e5\u672c\U0001F600",
		"+OK\r\n-ERR fake\r\n:1\r\n",
		strings.Repeat("\x00\xffbig", 256<<10), // 1.25 MiB
	}
}

// hostileName is a key or stream name of spaces, quotes, RESP framing,
// glob and template characters, NUL, unicode, and 2 KiB of length.
func hostileName(p, what string) string {
	return p + what + ` sp "dq" 'sq' \ {stream} *?[x] ` + "\r\n*1\r\n$8\r\nFLUSHALL\r\n\x00 \u00fc\u65e5" + strings.Repeat("L", 2048)
}

// Redis → Iggy through the runtime with a hostile stream name, consumer
// group and consumer, and hostile entries: every payload arrives byte
// for byte and in order, fields become headers only when they fit Iggy,
// an entry without the body field is a JSON object of exactly its
// fields, and nothing else happens in Redis (a canary key untouched, no
// key made but the stream).
func TestSourceHostileStreamNamesAndEntries(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	stream := hostileName(p, "stream")
	group := "g \"'\r\n\x00 \u00fc*"
	consumer := "c \"'\r\n\x00 \u00fc?" + strings.Repeat("C", 300)
	require.NoError(t, c.Set(ctx, p+"canary", "alive", 0).Err())
	payloads := hostilePayloads()
	bigField := strings.Repeat("F", 100<<10)
	for i, pl := range payloads {
		require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{
			"body", pl,
			"*1\r\n$8\r\nFLUSHALL\r\n", "resp field",
			"nul\x00key", "nul\x00value",
			bigField, "a field name of 100 KiB",
			"big value", strings.Repeat("v", 300),
			"n", fmt.Sprint(i),
		}}).Err())
	}
	// No body field: the payload is a JSON object of the fields (valid
	// UTF-8 here: see TestSourceJSONObjectOfBinaryFields).
	fields := map[string]string{"k\"ey": "v\\al\"ue", "nul\x00": "\x00", "cmd": "*1\r\n$8\r\nFLUSHALL\r\n", "\u00fc": "\U0001F600", bigField: "x"}
	var values []any
	for k, v := range fields {
		values = append(values, k, v)
	}
	require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: values}).Err())

	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_redis"
path = "redis"
[[streams]]
stream = "bridge"
topic = "records"
schema = "raw"
linger_time = "0ms"
[plugin_config]
url = %q
stream = %s
consumer_group = %s
client_id = %s
batch_size = 3
block = "20ms"
schema = "raw"
`, url, tomlString(stream), tomlString(group), tomlString(consumer))})
	want := len(payloads) + 1
	var msgs []iggy.Message
	connectortest.Eventually(t, "every entry in Iggy", func() bool {
		msgs = run.Messages(t, "bridge", "records")
		return len(msgs) >= want
	})
	require.Len(t, msgs, want)
	for i, pl := range payloads {
		m := msgs[i]
		require.Equal(t, []byte(pl), m.Payload, "entry %d byte for byte", i)
		for k, v := range map[string]string{"*1\r\n$8\r\nFLUSHALL\r\n": "resp field", "nul\x00key": "nul\x00value", "n": fmt.Sprint(i)} {
			h, ok := header.Get(m.Headers, k)
			require.True(t, ok, "entry %d: header %q", i, k)
			require.Equal(t, v, h.String())
		}
		for _, k := range []string{bigField, "big value"} {
			_, ok := header.Get(m.Headers, k)
			require.False(t, ok, "entry %d: a field that does not fit an Iggy header (%d bytes) is left out", i, len(k))
		}
		_, ok := header.Get(m.Headers, "body")
		require.False(t, ok, "the body is the payload, not a header")
	}
	var obj map[string]string
	require.NoError(t, json.Unmarshal(msgs[len(payloads)].Payload, &obj))
	require.Equal(t, fields, obj, "the entry's fields, exactly")

	require.Equal(t, "alive", c.Get(ctx, p+"canary").Val(), "no command ran from a name or a payload")
	var keys []string
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.HasPrefix(iter.Val(), p) {
			keys = append(keys, iter.Val())
		}
	}
	require.NoError(t, iter.Err())
	require.ElementsMatch(t, []string{stream, p + "canary"}, keys, "no key made but the stream")
	groups, err := c.XInfoGroups(ctx, stream).Result()
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, group, groups[0].Name)
	connectortest.Eventually(t, "every entry acknowledged", func() bool {
		pend, err := c.XPending(ctx, stream, group).Result()
		return err == nil && pend.Count == 0
	})
	cs, err := c.XInfoConsumers(ctx, stream, group).Result()
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, consumer, cs[0].Name)
}

// Lists mode through the runtime with a hostile list name: items arrive
// byte for byte, in order; the processing list is <key>:processing and
// empty in the end; nothing else in Redis changes.
func TestSourceHostileListNameAndItems(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	list := hostileName(p, "list")
	require.NoError(t, c.Set(ctx, p+"canary", "alive", 0).Err())
	payloads := hostilePayloads()
	for _, pl := range payloads {
		require.NoError(t, c.RPush(ctx, list, pl).Err())
	}
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_redis"
path = "redis"
[[streams]]
stream = "bridge"
topic = "records"
schema = "raw"
linger_time = "0ms"
[plugin_config]
url = %q
mode = "lists"
key = %s
batch_size = 4
block = "20ms"
schema = "raw"
`, url, tomlString(list))})
	var msgs []iggy.Message
	connectortest.Eventually(t, "every item in Iggy", func() bool {
		msgs = run.Messages(t, "bridge", "records")
		return len(msgs) >= len(payloads)
	})
	require.Len(t, msgs, len(payloads))
	for i, pl := range payloads {
		require.Equal(t, []byte(pl), msgs[i].Payload, "item %d byte for byte", i)
	}
	connectortest.Eventually(t, "the processing list emptied", func() bool { return c.Exists(ctx, list+":processing").Val() == 0 })
	require.Zero(t, c.Exists(ctx, list).Val(), "the list was drained")
	require.Equal(t, "alive", c.Get(ctx, p+"canary").Val(), "no command ran from a name or a payload")
	var keys []string
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.HasPrefix(iter.Val(), p) {
			keys = append(keys, iter.Val())
		}
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []string{p + "canary"}, keys, "no key left but the canary")
}

// Names that are not UTF-8 (which no TOML file can hold, but a
// configuration map can): the source reads and acknowledges the stream
// and the list by their exact bytes.
func TestSourceBinaryNames(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	name := p + "\xff\xfe\x00\x80"
	require.False(t, utf8.ValidString(name))
	payloads := hostilePayloads()
	for _, pl := range payloads {
		require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: name + "s", Values: []any{"body", pl}}).Err())
		require.NoError(t, c.RPush(ctx, name+"l", pl).Err())
	}
	for _, values := range []map[string]any{
		{"url": url, "stream": name + "s", "consumer_group": "\xff", "client_id": "\x00\xfe", "batch_size": 4, "block": "20ms"},
		{"url": url, "mode": "lists", "key": name + "l", "processing_key": name + "p\xc3", "batch_size": 4, "block": "20ms"},
	} {
		s := newSource(t, values)
		require.NoError(t, s.Open(ctx, nil))
		var got []string
		for len(got) < len(payloads) {
			b, err := s.Poll(ctx)
			require.NoError(t, err)
			for _, m := range b.Messages {
				got = append(got, string(m.Payload))
			}
			require.NoError(t, s.(connector.Acker).Ack(ctx, b))
		}
		require.NoError(t, s.Close(ctx))
		require.Equal(t, payloads, got, "%v", values["mode"])
	}
	pend, err := c.XPending(ctx, name+"s", "\xff").Result()
	require.NoError(t, err)
	require.Zero(t, pend.Count)
	require.Zero(t, c.Exists(ctx, name+"l", name+"p\xc3").Val())
}

// A stream or list name that holds a key of another type: Open or Poll
// fails naming it, with Redis's reason, and the key is left as it was.
func TestSourceNameOfAnotherType(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, p+"str", "keep me", 0).Err())

	s := newSource(t, map[string]any{"url": url, "stream": p + "str", "block": "20ms"})
	err := s.Open(ctx, nil)
	require.Error(t, err)
	require.ErrorContains(t, err, fmt.Sprintf("stream %q", p+"str"))
	require.ErrorContains(t, err, "WRONGTYPE")

	s = newSource(t, map[string]any{"url": url, "mode": "lists", "key": p + "str", "block": "20ms"})
	require.NoError(t, s.Open(ctx, nil))
	_, err = s.Poll(ctx)
	require.Error(t, err)
	require.ErrorContains(t, err, fmt.Sprintf("list %q", p+"str"))
	require.ErrorContains(t, err, "WRONGTYPE")
	require.NoError(t, s.Close(ctx))

	require.Equal(t, "keep me", c.Get(ctx, p+"str").Val())
	require.Zero(t, c.Exists(ctx, p+"str:processing").Val())
}

// Hostile configuration values are refused naming the key, and a bad
// URL's error does not show its password.
func TestSourceHostileConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"stream": "s", "mode": "streams\r\nFLUSHALL"}, "mode"},
		{map[string]any{"stream": "s", "schema": "json; DROP"}, "schema"},
		{map[string]any{"stream": "s", "url": "http://127.0.0.1:6379"}, "url"},
		{map[string]any{"stream": "s", "url": "redis://u:s3cr3t@127.0.0.1:notaport/0"}, "url"},
		{map[string]any{"stream": "s", "consumer_group": ""}, "consumer_group"},
		{map[string]any{"stream": "s", "client_id": ""}, "client_id"},
		{map[string]any{"stream": "s", "batch_size": 1 << 40}, "batch_size"},
		{map[string]any{"stream": "s", "block": "-1s"}, "block"},
		{map[string]any{"stream": "s", "block": "forever"}, "block"},
		{map[string]any{"stream": []any{"a", "b"}}, "stream"},
		{map[string]any{"stream": "s", "create_streams": "yes"}, "create_streams"},
		{map[string]any{"mode": "lists", "key": ""}, "key"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.key, "%v", c.values)
		require.NotContains(t, err.Error(), "s3cr3t", "%v", c.values)
	}
}

// An entry with an empty body and empty list items: Iggy refuses empty
// payloads (and could not dead-letter one), so the source passes over
// them, acknowledged at once, instead of failing its batch for ever; the
// records around them arrive.
func TestSourcePassesOverEmptyPayloads(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	for _, b := range []string{"a", "", "c"} {
		require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: p + "s", Values: []any{"body", b}}).Err())
	}
	require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: p + "s2", Values: []any{"body", ""}}).Err())
	require.NoError(t, c.RPush(ctx, p+"l", "", "a", "", "", "c").Err())
	require.NoError(t, c.RPush(ctx, p+"l2", "", "").Err())
	toml := func(mode, name string) string {
		return strings.Replace(sourceTOML(url, mode, name, 10, "raw"), `topic = "records"`, fmt.Sprintf("topic = %q", mode+"_"+strings.TrimPrefix(name, p)), 1)
	}
	run := connectortest.Start(t, map[string]string{
		"s.toml":  strings.Replace(toml("streams", p+"s"), `key = "from_redis"`, `key = "s"`, 1),
		"s2.toml": strings.Replace(toml("streams", p+"s2"), `key = "from_redis"`, `key = "s2"`, 1),
		"l.toml":  strings.Replace(toml("lists", p+"l"), `key = "from_redis"`, `key = "l"`, 1),
		"l2.toml": strings.Replace(toml("lists", p+"l2"), `key = "from_redis"`, `key = "l2"`, 1),
	})
	for _, topic := range []string{"streams_s", "lists_l"} {
		var msgs []iggy.Message
		connectortest.Eventually(t, topic+": both records", func() bool {
			msgs = run.Messages(t, "bridge", topic)
			return len(msgs) >= 2
		})
		require.Len(t, msgs, 2, topic)
		require.Equal(t, "a", string(msgs[0].Payload), topic)
		require.Equal(t, "c", string(msgs[1].Payload), topic)
	}
	for _, s := range []string{"s", "s2"} {
		connectortest.Eventually(t, s+": nothing pending", func() bool {
			pend, err := c.XPending(ctx, p+s, "ferry").Result()
			return err == nil && pend.Count == 0
		})
	}
	for _, l := range []string{"l", "l2"} {
		connectortest.Eventually(t, l+": the list and its processing list empty", func() bool {
			return c.Exists(ctx, p+l, p+l+":processing").Val() == 0
		})
	}
	require.Empty(t, run.Messages(t, "bridge", "streams_s2"))
	require.Empty(t, run.Messages(t, "bridge", "lists_l2"))
	for _, info := range run.Runtime.Connectors(connector.KindSource) {
		require.Empty(t, info.LastError, "source %s", info.Key)
		require.Zero(t, info.Restarts, "source %s", info.Key)
	}
}

// An entry without the body field is a JSON object of its fields; JSON
// strings are UTF-8, so bytes that are not become U+FFFD (as the package
// doc says), and the payload is valid JSON all the same.
func TestSourceJSONObjectOfBinaryFields(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: p + "s", Values: []any{"k\xff", "v\xfe\x00", "ok", "fine"}}).Err())
	s := newSource(t, map[string]any{"url": url, "stream": p + "s", "block": "20ms"})
	require.NoError(t, s.Open(ctx, nil))
	defer s.Close(ctx)
	b, err := s.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	require.True(t, json.Valid(b.Messages[0].Payload), "%q", b.Messages[0].Payload)
	var obj map[string]string
	require.NoError(t, json.Unmarshal(b.Messages[0].Payload, &obj))
	require.Equal(t, map[string]string{"k\ufffd": "v\ufffd\x00", "ok": "fine"}, obj)
}
