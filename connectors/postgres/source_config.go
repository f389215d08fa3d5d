package postgres

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SourceSpec is the postgres source's plugin_config. Keys without a
// "Ferry" note are upstream's (libiggy_connector_postgres_source).
var SourceSpec = connector.NewSpec(append(connectionFields(4),
	connector.NewEnumField("mode", "polling", "cdc").WithDefault("polling").
		WithDoc("polling: query tables by a tracking column; cdc: logical replication (pgoutput)"),
	connector.NewListField("tables", connector.NewStringField("").WithCheck(nonBlank)).WithExample([]string{"public.users"}).
		WithDoc(`tables to poll, or (cdc) to publish: "schema.table" or "table"`),
	connector.NewStringField("table").WithCheck(nonBlank).WithDoc("Ferry: one more table, a shorthand for tables = [table]"),
	connector.NewDurationField("poll_interval").WithDefault(10*time.Second).
		WithDoc("polling: pause after a poll that caught up"),
	connector.NewIntField("batch_size").Between(1, math.MaxUint32).WithDefault(1000).
		WithDoc("most rows per table per poll, or changes per batch"),
	connector.NewStringField("tracking_column").WithDefault("id").
		WithDoc("polling: an increasing column (a sequence or a timestamp) that orders and resumes reading"),
	connector.NewStringField("initial_offset").AcceptNumbers().
		WithDoc("polling: the first run reads rows whose tracking value is above it"),
	connector.NewStringField("custom_query").
		WithDoc("polling: replaces the generated query; $table, $offset, $limit, $now and $now_unix are bound as parameters"),
	connector.NewBoolField("snake_case_columns").WithDefault(false).WithDoc("rename columns to snake_case in records"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("wrap each row in {table_name, operation_type, timestamp, data, old_data}; false sends the row alone"),
	connector.NewStringField("replication_slot").WithDefault("iggy_slot").WithCheck(identifier).
		WithDoc("cdc: the logical replication slot"),
	connector.NewListField("capture_operations", connector.NewEnumField("", "INSERT", "UPDATE", "DELETE", "TRUNCATE")).
		WithDefault([]string{"INSERT", "UPDATE", "DELETE"}).WithDoc("cdc: the changes sent"),
	connector.NewEnumField("cdc_backend", "builtin", "pg_replicate").WithAliases(map[string]string{"pgoutput": "builtin"}).
		WithDefault("builtin").WithDoc(`cdc: "builtin" (logical replication with pgoutput); upstream's pg_replicate is not supported`),
	connector.NewBoolField("delete_after_read").WithDefault(false).WithDoc("polling: delete rows once they are in Iggy"),
	connector.NewStringField("processed_column").WithDoc("polling: a boolean column set to true once a row is in Iggy"),
	connector.NewStringField("primary_key_column").WithDoc("polling: breaks ties of tracking values; default tracking_column"),
	connector.NewStringField("payload_column").WithDoc("polling: send this column's value as the payload instead of a record of the row"),
	connector.NewEnumField("payload_format", "bytea", "text", "json_direct").
		WithAliases(map[string]string{"raw": "bytea", "jsonb": "json_direct", "jsonb_direct": "json_direct"}).
		WithDefault("bytea").WithDoc("polling: what payload_column holds"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each batch"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).
		WithDoc("retries of the deletes or marks done on Ack"),
	connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("wait between those retries"),
	connector.NewStringField("publication").WithDefault("iggy_pub").WithCheck(identifier).
		WithDoc("Ferry, cdc: the publication"),
	connector.NewEnumField("snapshot", "initial", "never").WithDefault("initial").
		WithDoc("Ferry, cdc: initial reads the published tables before streaming; never streams only"),
	connector.NewBoolField("replica_identity_full").WithDefault(false).
		WithDoc("Ferry, cdc: set REPLICA IDENTITY FULL so updates and deletes carry the whole old row"),
)...).Lint(lintConnection).Lint(lintSource)

// lintSource checks the keys of one mode.
func lintSource(s *connector.Settings, fail connector.FailFunc) {
	tables := append(s.Strings("tables"), s.String("table"))
	if s.String("table") == "" {
		tables = tables[:len(tables)-1]
	}
	query := s.String("custom_query")
	if s.String("mode") == "cdc" {
		if s.String("cdc_backend") == "pg_replicate" {
			fail("cdc_backend", `"pg_replicate" is not supported by Ferry; use "builtin" (logical replication with pgoutput)`)
		}
		if query != "" {
			fail("custom_query", "applies to polling mode only")
		}
		return
	}
	switch {
	case len(tables) == 0 && query == "":
		fail("tables", "required in polling mode (or set custom_query); expected a list of tables such as [\"users\"]")
	case query == "":
	case strings.Contains(query, "$table") && len(tables) == 0:
		fail("custom_query", "uses $table but tables is empty")
	case strings.Contains(query, "$offset") && !s.Has("initial_offset"):
		fail("initial_offset", "required when custom_query uses $offset (it is the value before the first row)")
	case (s.Bool("delete_after_read") || s.String("processed_column") != "") && len(tables) == 0:
		fail("custom_query", "with delete_after_read or processed_column needs tables to name the table")
	}
}

// payloadFormat says what a polled row becomes.
type payloadFormat int

const (
	formatRecord payloadFormat = iota // a JSON record of the row
	formatBytea
	formatText
	formatJSONDirect
)

// sourceSettings is a validated SourceConfig with defaults applied.
type sourceSettings struct {
	cdc             bool
	tables          []string
	pollInterval    time.Duration
	batchSize       int
	tracking        string
	pk              string // primary_key_column, default tracking
	initialOffset   *string
	customQuery     string
	snakeCase       bool
	includeMetadata bool
	deleteAfterRead bool
	processedColumn string
	payloadColumn   string
	payloadFormat   payloadFormat
	verbose         bool
	maxRetries      int
	retryDelay      time.Duration

	slot, publication string
	snapshot          bool
	replicaFull       bool
	capture           map[string]bool
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func identifier(v any) error {
	if !slotName.MatchString(v.(string)) {
		return fmt.Errorf("expected 1 to 63 characters of a-z, 0-9 and _, got %q", v)
	}
	return nil
}

func nonBlank(v any) error {
	if strings.TrimSpace(v.(string)) == "" {
		return errors.New("expected a table name, got an empty string")
	}
	return nil
}

// sourceSettingsFrom is the source's settings from its parsed spec.
func sourceSettingsFrom(set *connector.Settings) *sourceSettings {
	s := &sourceSettings{cdc: set.String("mode") == "cdc", tables: set.Strings("tables"),
		pollInterval: set.Duration("poll_interval"), batchSize: set.Int("batch_size"),
		tracking: set.String("tracking_column"), customQuery: set.String("custom_query"),
		snakeCase: set.Bool("snake_case_columns"), includeMetadata: set.Bool("include_metadata"),
		deleteAfterRead: set.Bool("delete_after_read"), processedColumn: set.String("processed_column"),
		payloadColumn: set.String("payload_column"), verbose: set.Bool("verbose_logging"),
		maxRetries: set.Int("max_retries"), retryDelay: set.Duration("retry_delay"),
		slot: set.String("replication_slot"), publication: set.String("publication"),
		snapshot: set.String("snapshot") == "initial", replicaFull: set.Bool("replica_identity_full"),
		capture: map[string]bool{}}
	if t := set.String("table"); t != "" {
		s.tables = append(s.tables, t)
	}
	s.pk = firstNonEmpty(set.String("primary_key_column"), s.tracking)
	if set.Has("initial_offset") {
		v := set.String("initial_offset")
		s.initialOffset = &v
	}
	s.payloadFormat = map[string]payloadFormat{"bytea": formatBytea, "text": formatText, "json_direct": formatJSONDirect}[set.String("payload_format")]
	if s.payloadColumn == "" {
		s.payloadFormat = formatRecord
	}
	for _, op := range set.Strings("capture_operations") {
		s.capture[op] = true
	}
	return s
}
