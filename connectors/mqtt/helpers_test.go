package mqtt

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mqtttest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "mqtt", Plugin: connector.PluginConfig{Source: "mqtt.toml", Values: values}}
}

const markerPrefix = "ferry-test-marker-"

// subscriber is a test client with a persistent session subscribed to a
// filter at QoS 2, recording what arrives.
type subscriber struct {
	t       testing.TB
	url, id string
	filter  string
	markers int

	mu     sync.Mutex
	got    []paho.Message
	client paho.Client
}

// subscribe connects a subscriber (clean session false, its own client
// id) to filter on url.
func subscribe(t testing.TB, url, filter string) *subscriber {
	t.Helper()
	s := &subscriber{t: t, url: url, id: mqtttest.Name(t, "sub"), filter: filter}
	s.connect(t)
	t.Cleanup(func() {
		if c := s.conn(); c != nil {
			c.Disconnect(100)
		}
	})
	return s
}

func (s *subscriber) conn() paho.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// connect (again, after a broker restart) with the same session.
func (s *subscriber) connect(t testing.TB) {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(s.url).SetClientID(s.id).SetCleanSession(false).SetAutoReconnect(false).
		SetOrderMatters(true).SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		s.mu.Lock()
		s.got = append(s.got, m)
		s.mu.Unlock()
	})
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect to %s: %v", s.url, tok.Error())
	}
	tok = c.Subscribe(s.filter, 2, nil)
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", s.filter, tok.Error())
	}
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
}

// reconnect connects again until the broker is back.
func (s *subscriber) reconnect(t testing.TB) {
	t.Helper()
	if c := s.conn(); c != nil {
		c.Disconnect(0)
	}
	connectortest.Eventually(t, "the subscriber back on the broker", func() bool {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(s.url).SetClientID(s.id + "-probe").SetConnectTimeout(time.Second))
		tok := c.Connect()
		ok := tok.WaitTimeout(5*time.Second) && tok.Error() == nil
		if ok {
			c.Disconnect(0)
		}
		return ok
	})
	s.connect(t)
}

// payloads returns what arrived so far, markers left out.
func (s *subscriber) payloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.got {
		if p := string(m.Payload()); !strings.HasPrefix(p, markerPrefix) {
			out = append(out, p)
		}
	}
	return out
}

// settle publishes a marker to topic from another client and waits until
// it arrived, then returns the payloads. mosquitto routes messages in the
// order it receives them, in one thread, so everything a sink had
// acknowledged before the marker was published has arrived by then.
func (s *subscriber) settle(t testing.TB, topic string) []string {
	t.Helper()
	s.mu.Lock()
	s.markers++
	marker := fmt.Sprintf("%s%d", markerPrefix, s.markers)
	s.mu.Unlock()
	publish(t, s.url, topic, 1, false, marker)
	connectortest.Eventually(t, "the marker "+marker, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.got {
			if string(m.Payload()) == marker {
				return true
			}
		}
		return false
	})
	return s.payloads()
}

// publish publishes payloads to topic at qos and waits for each.
func publish(t testing.TB, url, topic string, qos byte, retained bool, payloads ...string) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(mqtttest.Name(t, "pub")))
	tok := c.Connect()
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect to %s: %v", url, tok.Error())
	}
	defer c.Disconnect(100)
	for _, p := range payloads {
		tok := c.Publish(topic, qos, retained, p)
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish to %s: %v", topic, tok.Error())
		}
	}
}

func newSink(t testing.TB, values map[string]any) connector.Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	return s
}

func open(t testing.TB, s connector.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
}

// settleQuiet is settle, then waits until no payload arrived for three
// checks in a row (for QoS 0, which no broker acknowledges).
func (s *subscriber) settleQuiet(t testing.TB, topic string) []string {
	t.Helper()
	got := s.settle(t, topic)
	for quiet := 0; quiet < 3; {
		time.Sleep(50 * time.Millisecond)
		now := s.payloads()
		if len(now) == len(got) {
			quiet++
		} else {
			quiet = 0
		}
		got = now
	}
	return got
}
