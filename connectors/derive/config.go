package derive

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// DefaultAddress is where the derive sink writes when plugin_config has
// no address: the embedded broker's default address (config's
// DefaultEmbeddedAddress).
const DefaultAddress = "127.0.0.1:8090"

// Spec is the derive sink's plugin_config.
var Spec = connector.NewSpec(
	connector.NewStringField("to").Require().WithExample("shop/orders_per_user").
		WithDoc(`the output topic, "stream/topic", written as a changelog (created with one partition when missing)`),
	connector.NewEnumField("input", "events", "changelog").WithDefault("events").
		WithDoc(`"events": every message adds to its groups; "changelog": the input is a keyed table (the latest message per key header; deletion markers delete), each key counts once, in its latest value's group, and an update or a deletion marker retracts its previous contribution (no window, no udaf)`),
	connector.NewStringField("group_by").WithDefault("key").
		WithDoc(`"key" (the message's key header) or a JSON field path such as "user.id"`),
	connector.NewStringListField("aggregates").WithDefault([]any{"count(*)"}).
		WithDoc(`count(*), count(F), sum(F), min(F), max(F), avg(F), distinct_count(F), latest(F), latest(*) over JSON fields F`),
	connector.NewDurationField("window").WithDefault(time.Duration(0)).
		WithDoc("the window length on event time; 0 means no window (one group per key)"),
	connector.NewDurationField("hop").WithDefault(time.Duration(0)).
		WithDoc("the start interval of hopping windows, below window; 0 means tumbling windows"),
	connector.NewDurationField("allowed_lateness").WithDefault(time.Duration(0)).
		WithDoc("how long after a window's end (by the highest event time seen) events still update it"),
	connector.NewStringField("event_time").WithDefault("").
		WithDoc("a JSON field holding the event time (RFC 3339 string or Unix milliseconds); default the message's origin timestamp"),
	connector.NewStringField("filter").WithDefault("").
		WithDoc(`a predicate over JSON fields: FIELD OP LITERAL joined by and, or, not and parentheses, such as status = "paid" and amount > 10`),
	connector.NewEnumField("late", "drop", "dead_letter").WithDefault("drop").
		WithDoc(`events later than allowed_lateness: "drop" (counted, not applied) or "dead_letter" (needs the stream's on_error = "dead_letter")`),
	connector.NewBoolField("retract").WithDefault(false).
		WithDoc("emit a deletion marker for a window's group when the window closes (past allowed_lateness)"),
	connector.NewStringField("udaf").WithDefault("").
		WithDoc(`a WebAssembly user-defined aggregate (.wasm, package udaf's ABI); its emitted JSON is the value "udaf"`),
	connector.NewStringField("address").WithDefault(DefaultAddress).
		WithDoc(`the Iggy server to write the output to (default the embedded broker's); ${VAR} reads the runtime's environment`),
	connector.NewStringField("username").WithDefault("iggy").WithDoc("the output server's user"),
	connector.NewStringField("password").WithDefault("iggy").AsSecret().WithDoc("the output user's password"),
	connector.NewStringField("token").WithDefault("").AsSecret().WithDoc("a personal access token instead of username and password"),
	connector.NewStringField("state_dir").WithDefault("").
		WithDoc("where the checkpoint (groups, versions, input offsets) is kept; default the directory the runtime gives the connector (<[state] path>/data/sink-<key>)"),
)

// maxWindowsPerEvent bounds window / hop: the hopping windows one event
// updates.
const maxWindowsPerEvent = 100

// settings is a checked configuration.
type settings struct {
	key                   string
	toStream, toTopic     string
	changelog             bool   // input = "changelog"
	groupBy               string // "" for the message key
	aggs                  []aggSpec
	window, hop, lateness time.Duration
	eventTime             string
	filter                *filter
	filterText            string
	deadLetterLate        bool
	retract               bool
	udaf                  string
	address, user, pass   string
	token                 string
	stateDir              string
}

func parseSettings(cfg connector.Config) (*settings, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := &settings{key: cfg.Key, window: set.Duration("window"), hop: set.Duration("hop"),
		lateness: set.Duration("allowed_lateness"), eventTime: set.String("event_time"),
		deadLetterLate: set.String("late") == "dead_letter", retract: set.Bool("retract"),
		udaf: set.String("udaf"), address: set.String("address"), user: set.String("username"),
		pass: set.String("password"), token: set.String("token"), stateDir: set.String("state_dir"),
		changelog: set.String("input") == "changelog"}
	to := set.String("to")
	st, tp, ok := strings.Cut(to, "/")
	if !ok || st == "" || tp == "" || strings.Contains(tp, "/") {
		return nil, set.Errorf("to", "%q: want \"stream/topic\"", to)
	}
	s.toStream, s.toTopic = st, tp
	if g := set.String("group_by"); g != "key" {
		if err := checkPath(g); err != nil {
			return nil, set.Errorf("group_by", "%v", err)
		}
		s.groupBy = g
	}
	if s.eventTime != "" {
		if err := checkPath(s.eventTime); err != nil {
			return nil, set.Errorf("event_time", "%v", err)
		}
	}
	for i, a := range set.Strings("aggregates") {
		spec, err := parseAgg(a)
		if err != nil {
			return nil, set.Errorf(fmt.Sprintf("aggregates[%d]", i), "%v", err)
		}
		for _, prev := range s.aggs {
			if prev.name == spec.name {
				return nil, set.Errorf(fmt.Sprintf("aggregates[%d]", i), "%q repeats %s", a, prev.text)
			}
		}
		s.aggs = append(s.aggs, spec)
	}
	if len(s.aggs) == 0 && s.udaf == "" {
		return nil, set.Errorf("aggregates", "no aggregate: name at least one, or a udaf")
	}
	switch {
	case s.window < 0:
		return nil, set.Errorf("window", "must not be negative")
	case s.window > 0 && s.window < time.Millisecond:
		return nil, set.Errorf("window", "%s: windows are at least 1ms", s.window)
	case s.hop < 0 || (s.hop > 0 && (s.window == 0 || s.hop > s.window)):
		return nil, set.Errorf("hop", "%s: want a duration between 1ms and window (%s)", s.hop, s.window)
	case s.hop > 0 && s.window%s.hop != 0:
		return nil, set.Errorf("hop", "%s: window (%s) must be a multiple of hop", s.hop, s.window)
	case s.hop > 0 && s.window/s.hop > maxWindowsPerEvent:
		return nil, set.Errorf("hop", "%s: an event would be in %d windows of %s; at most %d", s.hop, s.window/s.hop, s.window, maxWindowsPerEvent)
	case s.lateness < 0:
		return nil, set.Errorf("allowed_lateness", "must not be negative")
	case s.window == 0 && (s.lateness > 0 || s.retract):
		return nil, set.Errorf("window", "allowed_lateness and retract need a window")
	}
	if s.changelog && s.window > 0 {
		// A row of a table has no event time of its own, and an update
		// would have to retract from a window already closed and gone.
		return nil, set.Errorf("window", `%s: input = "changelog" takes no window (a table's update retracts its key's previous value, which a closed window no longer holds); use input = "events"`, s.window)
	}
	if s.changelog && s.udaf != "" {
		return nil, set.Errorf("udaf", `input = "changelog" takes no udaf: a user-defined aggregate has no inverse of add, so an update or a deletion marker could not retract a key's previous value`)
	}
	if s.hop == 0 {
		s.hop = s.window
	}
	if s.filterText = set.String("filter"); s.filterText != "" {
		if s.filter, err = parseFilter(s.filterText); err != nil {
			return nil, set.Errorf("filter", "%v", err)
		}
	}
	if s.token != "" && set.Has("password") {
		return nil, set.Errorf("token", "give a token or a username and password, not both")
	}
	if s.udaf != "" {
		if err := cfg.Paths.Check(s.udaf); err != nil {
			return nil, set.Errorf("udaf", "%v", err)
		}
	}
	if s.stateDir == "" {
		s.stateDir = cfg.StateDir
		if s.stateDir == "" {
			s.stateDir = filepath.Join("local_state", "derive", cfg.Key)
		}
	} else if err := cfg.Paths.Check(s.stateDir); err != nil {
		return nil, set.Errorf("state_dir", "%v", err)
	}
	return s, nil
}

// checkPath checks a dotted JSON field path.
func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("empty field path")
	}
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return fmt.Errorf("field path %q has an empty part", p)
		}
	}
	return nil
}
