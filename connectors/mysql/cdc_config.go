package mysql

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ferryhq/ferry/connector"
)

// serverIDBase is where the replica ids a CDC source picks for itself
// start (0x46 is "F"): unless server_id is set, each source takes a
// random id in [serverIDBase, serverIDBase+2^24), unlikely to be a real
// replica's, so that several sources (and a restarted one whose old
// connection the server has not yet dropped) do not displace each other.
const serverIDBase = 0x46000000

// cdcFields are the keys of CDC mode.
func cdcFields() []connector.Field {
	return []connector.Field{
		connector.NewIntField("server_id").Between(1, math.MaxUint32).
			WithDoc("cdc: the replica id the source connects with, unique among the server's replicas; default a random id from 1174405120 up"),
		connector.NewEnumField("snapshot", "initial", "never").WithDefault("initial").
			WithDoc("cdc: initial reads the tables before streaming; never streams changes from the current position only"),
		connector.NewListField("capture_operations", connector.NewEnumField("", "INSERT", "UPDATE", "DELETE")).
			WithDefault([]string{"INSERT", "UPDATE", "DELETE"}).WithDoc("cdc: the changes sent"),
	}
}

// pollingOnly are keys that mean nothing to CDC mode.
var pollingOnly = []string{"tracking_column", "primary_key_column", "poll_interval", "delete_after_read", "processed_column", "payload_column",
	"initial_offset", "custom_query"}

func lintCDC(s *connector.Settings, fail connector.FailFunc) {
	if s.String("mode") != "cdc" {
		for _, k := range []string{"server_id", "snapshot", "capture_operations"} {
			if s.Has(k) {
				fail(k, `is a key of mode = "cdc"`)
			}
		}
		return
	}
	for _, k := range pollingOnly {
		if s.Has(k) {
			fail(k, `is a key of mode = "polling"; the cdc mode does not take it`)
		}
	}
	if s.Has("capture_operations") && len(s.Strings("capture_operations")) == 0 {
		fail("capture_operations", "is empty: nothing would be captured")
	}
}

// cdcSettings are the CDC mode's settings.
type cdcSettings struct {
	database  string             // the DSN's database
	tables    map[[2]string]bool // captured [database, table]; empty: every table of database
	order     [][2]string        // tables as configured, for the snapshot
	serverID  uint32
	snapshot  bool
	capture   map[string]bool
	batchSize int
}

func cdcSettingsFrom(s *connector.Settings, database string) *cdcSettings {
	id := uint32(serverIDBase + rand.IntN(1<<24))
	if s.Has("server_id") {
		id = uint32(s.Int("server_id"))
	}
	out := &cdcSettings{database: database, tables: map[[2]string]bool{}, serverID: id,
		snapshot: s.String("snapshot") == "initial", capture: map[string]bool{}, batchSize: s.Int("batch_size")}
	names := s.Strings("tables")
	if t := s.String("table"); t != "" {
		names = append(names, t)
	}
	for _, n := range names {
		key := [2]string{database, n}
		if db, t, ok := strings.Cut(n, "."); ok {
			key = [2]string{db, t}
		}
		if !out.tables[key] {
			out.tables[key] = true
			out.order = append(out.order, key)
		}
	}
	for _, op := range s.Strings("capture_operations") {
		out.capture[op] = true
	}
	return out
}

// captures says whether changes of database.table are sent.
func (c *cdcSettings) captures(database, table string) bool {
	if len(c.tables) == 0 {
		return database == c.database
	}
	return c.tables[[2]string{database, table}]
}
