// Package mqtttest gives tests a real MQTT broker (Debian's mosquitto
// 2.0.11), through servertest: the broker scripts/test.sh started
// (FERRY_TEST_MQTT_URL, tcp://127.0.0.1:PORT), or one the test binary
// starts for itself (the program FERRY_MOSQUITTO_SERVER names, else
// mosquitto on PATH or /usr/sbin/mosquitto); FERRY_REQUIRE_MQTT=1 turns a
// skip for want of it into a failure.
//
// The broker listens on 127.0.0.1 only, takes anonymous clients, and
// keeps persistent sessions in DIR/mosquitto.db. What mosquitto keeps
// across a kill -9 is what its last save of that file holds: retained
// messages, persistent (clean session false) clients with their
// subscriptions, and the QoS 1/2 messages queued or in flight for them.
// It saves only at autosave points; here autosave_on_changes with
// autosave_interval 1 saves after every change it counts (a subscription,
// a retained message, a queued message), so what is lost to a kill is
// the change of the event-loop turn the kill interrupts — a message
// mosquitto acknowledged to its publisher in the same turn can be lost.
// The inflight window and the offline queue are unlimited
// (max_inflight_messages 0, max_queued_messages 0): mosquitto's defaults
// of 20 and 1000 would drop queued messages beyond 1000 for an offline
// session, which a production broker must size for its consumers.
//
// Tests share the broker and keep apart by topics and client ids of
// their own (Name). A test that takes the broker down gets one of its own
// with Private, and stops and starts it with Halt and Resume (same port,
// same persistence file). PrivateTLS is such a broker listening with
// TLS, on the certificate and key a test gives it.
//
//	func TestMain(m *testing.M) { mqtttest.Main(m) }
package mqtttest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/internal/servertest"
)

// Server is the MQTT (mosquitto) kind of test server.
var Server = &servertest.Server{
	Name:       "MQTT broker (mosquitto)",
	URLEnv:     "FERRY_TEST_MQTT_URL",
	RequireEnv: "FERRY_REQUIRE_MQTT",
	Start:      start,
}

var names atomic.Int64

// Main runs the tests and stops a broker they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the tcp:// URL of the shared test broker.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Name returns a name (a topic level or a client id) no other test uses.
func Name(tb testing.TB, what string) string {
	return fmt.Sprintf("ferry-test-%s-%d-%d", what, os.Getpid(), names.Add(1))
}

// Own is a broker only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a broker only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// Throughput is a broker only the calling benchmark uses, configured as
// Server's but saving its persistence file at mosquitto's default
// (every 1800 s and at shutdown) instead of after every change: saving
// the whole file for every message queued for a persistent session
// costs mosquitto about 40 times the throughput.
func Throughput(tb testing.TB) *Own { tb.Helper(); return throughput.Private(tb) }

var throughput = &servertest.Server{
	Name: Server.Name, URLEnv: "FERRY_TEST_MQTT_THROUGHPUT_URL", RequireEnv: Server.RequireEnv,
	Start: func() (*servertest.Process, string, error) { return startWith(false, nil) },
}

// TLS is a TLS listener's PEM files, as mosquitto's cafile, certfile and
// keyfile take them.
type TLS struct {
	// CA is the certificate of the CA that client certificates must be
	// signed by (mosquitto needs one even when it asks for none).
	CA []byte
	// Cert and Key are the broker's certificate (chain) and its key.
	Cert, Key []byte
	// RequireCertificate makes the broker refuse a client without a
	// certificate signed by CA (require_certificate true).
	RequireCertificate bool
}

// PrivateTLS starts a broker only the calling test uses, configured as
// Server's but listening with TLS: its URL is ssl://127.0.0.1:PORT. It
// is stopped at the end of the test.
func PrivateTLS(tb testing.TB, files TLS) *Own {
	tb.Helper()
	s := &servertest.Server{Name: Server.Name + " with TLS", RequireEnv: Server.RequireEnv,
		Start: func() (*servertest.Process, string, error) { return startWith(true, &files) }}
	return s.Private(tb)
}

// tlsConfig is the listener's TLS lines, the files written to dir.
func tlsConfig(dir string, files *TLS) (string, error) {
	for name, data := range map[string][]byte{"ca.pem": files.CA, "server.pem": files.Cert, "server.key": files.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", fmt.Errorf("mosquitto TLS file: %w", err)
		}
	}
	return fmt.Sprintf("cafile %[1]s/ca.pem\ncertfile %[1]s/server.pem\nkeyfile %[1]s/server.key\nrequire_certificate %[2]t\n",
		dir, files.RequireCertificate), nil
}

// Config is the mosquitto configuration for a broker on port with its
// files in dir (see the package doc); without everyChange, mosquitto
// saves at its default interval.
func Config(dir string, port int, everyChange bool) string {
	autosave := "autosave_interval 1\nautosave_on_changes true"
	if !everyChange {
		autosave = "autosave_interval 1800"
	}
	return fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
%s
max_inflight_messages 0
max_queued_messages 0
log_dest file %s/mosquitto.log
log_type error
log_type warning
`, port, dir, autosave, dir)
}

// start runs mosquitto on a free loopback port with its files in a
// directory of its own.
func start() (*servertest.Process, string, error) { return startWith(true, nil) }

func startWith(everyChange bool, files *TLS) (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_MOSQUITTO_SERVER", "mosquitto", "/usr/sbin/mosquitto")
	if err != nil {
		return nil, "", fmt.Errorf("%w; Debian: apt-get install mosquitto", err)
	}
	dir, err := servertest.TempDir("mosquitto")
	if err != nil {
		return nil, "", err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		conf := filepath.Join(dir, "mosquitto.conf")
		text, scheme := Config(dir, port, everyChange), "tcp"
		if files != nil {
			// After the listener line: these are the listener's.
			lines, err := tlsConfig(dir, files)
			if err != nil {
				return nil, "", err
			}
			text, scheme = text+lines, "ssl"
		}
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, "", fmt.Errorf("mosquitto config: %w", err)
		}
		p, err := servertest.Start(servertest.Command{
			Args:  []string{bin, "-c", conf},
			Env:   []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir},
			Dir:   dir,
			User:  "mosquitto",
			Ready: servertest.Dial(fmt.Sprintf("127.0.0.1:%d", port)),
			Log:   "mosquitto.log",
		})
		if err == nil {
			return p, fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}
