package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
)

// maxPacket is MQTT 3.1.1's largest remaining length of a packet
// (268,435,455 bytes): a PUBLISH holds its topic, packet id and payload.
const maxPacket = 268_435_455

var schemes = []string{"tcp", "mqtt", "ssl", "tls", "mqtts"}

// The connection's keys, shared by the sink and the source; names as
// Redpanda Connect's mqtt input and output have them.
func connectionFields() []connector.Field {
	return []connector.Field{
		connector.NewStringListField("urls").Require().WithExample([]any{"tcp://localhost:1883"}).WithCheck(checkURLs).
			WithDoc("the brokers, tcp:// (or mqtt://) and ssl:// (or tls://, mqtts://, with the system's CAs); tried in order"),
		connector.NewStringField("client_id").WithDefault("").WithExample("ferry-1").
			WithDoc(`the MQTT client id; "" = "ferry-" and a random suffix (at most 23 bytes for brokers that keep to MQTT 3.1.1's minimum)`),
		connector.NewStringField("user").WithDefault("").WithDoc("the user name; empty: anonymous"),
		connector.NewStringField("password").AsSecret().WithDefault("").WithDoc("the password (a secret: never logged or shown)"),
		connector.NewDurationField("connect_timeout").WithDefault(30 * time.Second).WithDoc("how long connecting (and subscribing) may take"),
		connector.NewIntField("keepalive").Between(1, 65535).WithDefault(30).WithDoc("the keep-alive interval, in seconds"),
	}
}

// SinkSpec is the sink's plugin_config (Ferry's: upstream has no MQTT
// connector). Key names follow Redpanda Connect's mqtt output.
var SinkSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringField("topic").Require().WithExample("iggy/{stream}/{topic}").WithCheck(checkTemplate).
		WithDoc("the topic published to: {stream}, {topic} and {partition} are the Iggy stream, topic and partition of the batch; no + or # wildcards"),
	connector.NewIntField("qos").Between(0, 2).WithDefault(1).
		WithDoc("0: fire and forget (may lose); 1: acknowledged before the offset is committed (may repeat); 2: exactly once per MQTT session"),
	connector.NewBoolField("retained").WithDefault(false).WithDoc("publish with the retain flag: the broker keeps the last message of each topic for new subscribers"),
	connector.NewDurationField("write_timeout").WithDefault(30*time.Second).
		WithDoc("how long a batch's publishes may take to be acknowledged (QoS 1, 2) or written (QoS 0)"),
	connector.NewSizeField("max_message_size").Between(1, maxPacket).WithDefault(int64(maxPacket)).
		WithDoc("Ferry: the broker's limit on a PUBLISH (mosquitto's message_size_limit); a larger message is dead-lettered before it is sent, since an MQTT 3.1.1 broker drops it silently"),
)...)

// SourceSpec is the source's plugin_config (Ferry's). Key names follow
// Redpanda Connect's mqtt input; clean_session defaults to false here.
var SourceSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringListField("topics").Require().WithExample([]any{"sensors/+/temperature", "alerts/#"}).WithCheck(checkFilters).
		WithDoc("the topic filters subscribed to (+ and # wildcards)"),
	connector.NewIntField("qos").Between(0, 2).WithDefault(1).
		WithDoc("the subscription's QoS: 0 loses what arrives while Ferry is away; 1 and 2 are kept by the broker for the persistent session"),
	connector.NewBoolField("clean_session").WithDefault(false).
		WithDoc("false: a persistent session under client_id, so the broker keeps QoS 1/2 messages across restarts; true: start afresh each time"),
	connector.NewStringMapField("topic_routes").WithExample(map[string]string{"alerts/#": "alerts"}).
		WithDoc("Ferry: an MQTT topic filter (one of topics) → the Iggy topic its messages go to, in each of the connector's streams; unmatched messages go to the stream's topic. When several match, the longest filter wins"),
	connector.NewBoolField("skip_retained").WithDefault(false).
		WithDoc("Ferry: drop (and acknowledge) retained messages the broker sends on subscribing, forwarding only live ones"),
	connector.NewIntField("batch_size").Between(1, 65535).WithDefault(100).WithDoc("Ferry: most messages per batch"),
	connector.NewDurationField("batch_wait").WithDefault(100*time.Millisecond).
		WithDoc("Ferry: after the first message, how long a batch waits for more"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("Ferry: the payloads' format in Iggy"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("Ferry: add mqtt_topic, mqtt_qos, mqtt_retained and mqtt_duplicate headers"),
)...).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if !s.Bool("clean_session") && s.String("client_id") == "" {
		fail("client_id", "a persistent session (clean_session = false) needs a fixed client_id: with a random one every restart starts a new session and loses what the broker kept")
	}
	filters := map[string]bool{}
	for _, f := range s.Strings("topics") {
		filters[f] = true
	}
	for f, topic := range s.StringMap("topic_routes") {
		if !filters[f] {
			fail("topic_routes."+f, "%q is not one of topics", f)
		}
		if topic == "" || len(topic) > 255 {
			fail("topic_routes."+f, "the Iggy topic name must be 1..255 bytes, not %d", len(topic))
		}
	}
})

func checkURLs(v any) error {
	list, _ := v.([]any)
	if len(list) == 0 {
		return fmt.Errorf("expected at least one broker URL")
	}
	for _, e := range list {
		s, _ := e.(string)
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || !contains(schemes, u.Scheme) {
			return fmt.Errorf("%q: expected a URL such as tcp://host:1883 (schemes %s)", safeURL(s), strings.Join(schemes, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// safeURL is raw without credentials, for logs and errors.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.Redacted()
}

// checkName reports why s cannot be (part of) an MQTT topic name or
// filter: invalid UTF-8, NUL, or the control characters mosquitto refuses
// (it disconnects a client that sends them).
func checkName(s string) error {
	if len(s) > 65535 {
		return fmt.Errorf("%d bytes, above MQTT's 65535", len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == 0:
			return fmt.Errorf("holds a NUL character")
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("holds the control character %U", r)
		case r == 0xfffe || r == 0xffff:
			return fmt.Errorf("holds the non-character %U", r)
		}
	}
	return nil
}

// checkTopic reports why s cannot be a topic published to.
func checkTopic(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case strings.ContainsAny(s, "+#"):
		return fmt.Errorf("%q holds a + or # wildcard, which only subscriptions may use", s)
	case strings.HasPrefix(s, "$"):
		return fmt.Errorf("%q starts with $, which brokers keep for themselves ($SYS)", s)
	}
	if err := checkName(s); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	return nil
}

// checkFilter reports why s cannot be a topic filter.
func checkFilter(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if err := checkName(s); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	levels := strings.Split(s, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("%q: # must be the last level", s)
		case l != "#" && l != "+" && strings.ContainsAny(l, "+#"):
			return fmt.Errorf("%q: a wildcard must fill a whole level", s)
		}
	}
	return nil
}

func checkFilters(v any) error {
	list, _ := v.([]any)
	if len(list) == 0 {
		return fmt.Errorf("expected at least one topic filter")
	}
	for _, e := range list {
		s, _ := e.(string)
		if err := checkFilter(s); err != nil {
			return err
		}
	}
	return nil
}

// template is a topic with {stream}, {topic} and {partition} in it.
type template struct{ parts []string } // literal, placeholder, literal ...

func parseTemplate(s string) (template, error) {
	var t template
	rest := s
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return t, fmt.Errorf("%q: a { without }", s)
		}
		name := rest[i+1 : i+j]
		if name != "stream" && name != "topic" && name != "partition" {
			return t, fmt.Errorf("%q: unknown placeholder {%s} (want {stream}, {topic} or {partition})", s, name)
		}
		t.parts = append(t.parts, rest[:i], name)
		rest = rest[i+j+1:]
	}
	// The literal parts must be fit on their own.
	probe := t.render("s", "t", 0)
	if err := checkTopic(probe); err != nil {
		return t, err
	}
	return t, nil
}

func checkTemplate(v any) error {
	s, _ := v.(string)
	_, err := parseTemplate(s)
	return err
}

func (t template) render(stream, topic string, partition uint32) string {
	var b strings.Builder
	for i, p := range t.parts {
		if i%2 == 0 {
			b.WriteString(p)
			continue
		}
		switch p {
		case "stream":
			b.WriteString(stream)
		case "topic":
			b.WriteString(topic)
		case "partition":
			fmt.Fprint(&b, partition)
		}
	}
	return b.String()
}

// clientOptions are paho's options for the connection keys. Reconnecting
// is left to Ferry (the runtime restarts a connector), so that what was in
// flight on a lost connection is handled in one place.
func clientOptions(set *connector.Settings, role string) *paho.ClientOptions {
	o := paho.NewClientOptions()
	for _, u := range set.Strings("urls") {
		o.AddBroker(u)
	}
	id := set.String("client_id")
	if id == "" {
		var r [6]byte
		_, _ = rand.Read(r[:])
		id = "ferry-" + role + "-" + hex.EncodeToString(r[:])
	}
	o.SetClientID(id).SetUsername(set.String("user")).SetPassword(set.String("password"))
	o.SetProtocolVersion(4) // MQTT 3.1.1
	o.SetConnectTimeout(set.Duration("connect_timeout"))
	o.SetKeepAlive(time.Duration(set.Int("keepalive")) * time.Second)
	o.SetAutoReconnect(false).SetConnectRetry(false)
	return o
}

// wait waits for tok or ctx.
func wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connect connects c within the connect timeout and ctx.
func connect(ctx context.Context, c paho.Client, timeout time.Duration, where string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := wait(ctx, c.Connect()); err != nil {
		c.Disconnect(0)
		return fmt.Errorf("connect to %s: %w", where, err)
	}
	return nil
}

func where(set *connector.Settings) string {
	var out []string
	for _, u := range set.Strings("urls") {
		out = append(out, safeURL(u))
	}
	return strings.Join(out, ", ")
}
