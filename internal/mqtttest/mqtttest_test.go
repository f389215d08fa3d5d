package mqtttest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

func TestMain(m *testing.M) { Main(m) }

func must(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("%T: %v", tok, tok.Error())
	}
}

// What the package doc says mosquitto keeps across a kill -9: a
// persistent session, its subscription and the QoS 1 messages queued for
// it while it was offline. The session reconnects without subscribing
// and gets them.
func TestAKillKeepsPersistentSessionsAndTheirQueues(t *testing.T) {
	srv := Private(t)
	id, topic := Name(t, "sub"), Name(t, "topic")
	var mu sync.Mutex
	var got []string
	opts := func() *paho.ClientOptions {
		return paho.NewClientOptions().AddBroker(srv.URL).SetClientID(id).SetCleanSession(false).SetAutoReconnect(false).
			SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
				mu.Lock()
				got = append(got, string(m.Payload()))
				mu.Unlock()
			})
	}
	sub := paho.NewClient(opts())
	must(t, sub.Connect())
	must(t, sub.Subscribe(topic, 1, nil))
	sub.Disconnect(250)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(srv.URL).SetClientID(Name(t, "pub")))
	must(t, pub.Connect())
	for i := range 3 {
		must(t, pub.Publish(topic, 1, false, fmt.Sprint(i)))
	}
	pub.Disconnect(250)
	// Give mosquitto's loop a turn to save after the last queued message:
	// the one change a kill may lose.
	time.Sleep(200 * time.Millisecond)
	srv.Halt()
	srv.Resume(t)

	again := paho.NewClient(opts())
	must(t, again.Connect())
	defer again.Disconnect(250)
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the kill the session got %q, want the 3 queued messages", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("got %q, want [0 1 2]", got)
	}
}
