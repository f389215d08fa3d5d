package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SourceConfig is the postgres source's plugin_config. Keys without a
// "Ferry:" note are upstream's (libiggy_connector_postgres_source).
type SourceConfig struct {
	Connection
	// Mode is "polling" (default) or "cdc".
	Mode string `json:"mode"`
	// Tables to poll, or (CDC) to publish; "schema.table" or "table".
	Tables []string `json:"tables"`
	// Table is one more table (Ferry: a shorthand for tables = [table]).
	Table string `json:"table"`
	// PollInterval is the pause between polls that found nothing new
	// (default 10s, as upstream; polling mode).
	PollInterval *connector.Duration `json:"poll_interval"`
	// BatchSize is the most rows per table per poll, or changes per batch
	// (default 1000).
	BatchSize *uint32 `json:"batch_size"`
	// TrackingColumn orders and resumes polling (default "id").
	TrackingColumn string `json:"tracking_column"`
	// InitialOffset: only rows whose tracking value is greater are read
	// on the first run.
	InitialOffset any `json:"initial_offset"`
	// CustomQuery replaces the generated query; $table, $offset, $limit,
	// $now and $now_unix are bound as parameters ($table is the quoted
	// table name).
	CustomQuery      string `json:"custom_query"`
	SnakeCaseColumns bool   `json:"snake_case_columns"`
	// IncludeMetadata wraps each row in {table_name, operation_type,
	// timestamp, data, old_data} (default true); false sends the row alone.
	IncludeMetadata   *bool    `json:"include_metadata"`
	ReplicationSlot   string   `json:"replication_slot"`
	CaptureOperations []string `json:"capture_operations"`
	// CDCBackend: "builtin" (default; Ferry's is pgoutput).
	CDCBackend       string `json:"cdc_backend"`
	DeleteAfterRead  bool   `json:"delete_after_read"`
	ProcessedColumn  string `json:"processed_column"`
	PrimaryKeyColumn string `json:"primary_key_column"`
	PayloadColumn    string `json:"payload_column"`
	// PayloadFormat of payload_column: bytea (raw), text, json_direct.
	PayloadFormat  string              `json:"payload_format"`
	VerboseLogging bool                `json:"verbose_logging"`
	MaxRetries     *uint32             `json:"max_retries"`
	RetryDelay     *connector.Duration `json:"retry_delay"`

	// Publication is the CDC publication (Ferry; default "iggy_pub").
	Publication string `json:"publication"`
	// Snapshot is "initial" (default: read the published tables before
	// streaming) or "never" (Ferry).
	Snapshot string `json:"snapshot"`
	// ReplicaIdentityFull sets REPLICA IDENTITY FULL on the published
	// tables, so updates and deletes carry the whole old row (Ferry).
	ReplicaIdentityFull bool `json:"replica_identity_full"`
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

func (c *SourceConfig) settings(p connector.PluginConfig) (*sourceSettings, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: plugin_config.%s %s", p.Source, key, fmt.Sprintf(format, args...))
	}
	s := &sourceSettings{pollInterval: 10 * time.Second, batchSize: 1000, tracking: "id",
		includeMetadata: true, maxRetries: 3, retryDelay: time.Second,
		slot: "iggy_slot", publication: "iggy_pub", snapshot: true,
		capture: map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true}}
	switch strings.ToLower(c.Mode) {
	case "", "polling":
	case "cdc":
		s.cdc = true
	default:
		return nil, bad("mode", "is %q, want \"polling\" or \"cdc\"", c.Mode)
	}
	s.tables = append(s.tables, c.Tables...)
	if c.Table != "" {
		s.tables = append(s.tables, c.Table)
	}
	for i, t := range s.tables {
		if strings.TrimSpace(t) == "" {
			return nil, bad(fmt.Sprintf("tables[%d]", i), "is empty")
		}
	}
	if c.PollInterval != nil {
		s.pollInterval = c.PollInterval.D()
	}
	if c.BatchSize != nil {
		if *c.BatchSize == 0 {
			return nil, bad("batch_size", "is 0, want at least 1")
		}
		s.batchSize = int(*c.BatchSize)
	}
	if c.TrackingColumn != "" {
		s.tracking = c.TrackingColumn
	}
	s.pk = firstNonEmpty(c.PrimaryKeyColumn, s.tracking)
	if c.InitialOffset != nil {
		v, err := offsetString(c.InitialOffset)
		if err != nil {
			return nil, bad("initial_offset", "%v", err)
		}
		s.initialOffset = &v
	}
	s.customQuery = c.CustomQuery
	s.snakeCase = c.SnakeCaseColumns
	if c.IncludeMetadata != nil {
		s.includeMetadata = *c.IncludeMetadata
	}
	s.deleteAfterRead = c.DeleteAfterRead
	s.processedColumn = c.ProcessedColumn
	s.payloadColumn = c.PayloadColumn
	switch strings.ToLower(c.PayloadFormat) {
	case "", "bytea", "raw":
		s.payloadFormat = formatBytea
	case "text":
		s.payloadFormat = formatText
	case "json_direct", "jsonb", "jsonb_direct":
		s.payloadFormat = formatJSONDirect
	default:
		return nil, bad("payload_format", "is %q, want bytea, text or json_direct", c.PayloadFormat)
	}
	if s.payloadColumn == "" {
		s.payloadFormat = formatRecord
	}
	s.verbose = c.VerboseLogging
	if c.MaxRetries != nil {
		s.maxRetries = int(*c.MaxRetries)
	}
	if c.RetryDelay != nil {
		s.retryDelay = c.RetryDelay.D()
	}
	if s.cdc {
		return s, c.cdcSettings(s, bad)
	}
	return s, c.pollingSettings(s, bad)
}

func (c *SourceConfig) pollingSettings(s *sourceSettings, bad func(string, string, ...any) error) error {
	if len(s.tables) == 0 && s.customQuery == "" {
		return bad("tables", "is required in polling mode (or set custom_query)")
	}
	if s.customQuery != "" {
		if strings.Contains(s.customQuery, "$table") && len(s.tables) == 0 {
			return bad("custom_query", "uses $table but plugin_config.tables is empty")
		}
		if strings.Contains(s.customQuery, "$offset") && s.initialOffset == nil {
			return bad("initial_offset", "is required when custom_query uses $offset (it is the value before the first row)")
		}
		if (s.deleteAfterRead || s.processedColumn != "") && len(s.tables) == 0 {
			return bad("custom_query", "with delete_after_read or processed_column needs plugin_config.tables to name the table")
		}
	}
	return nil
}

func (c *SourceConfig) cdcSettings(s *sourceSettings, bad func(string, string, ...any) error) error {
	switch strings.ToLower(c.CDCBackend) {
	case "", "builtin", "pgoutput":
	case "pg_replicate":
		return bad("cdc_backend", "\"pg_replicate\" is not supported by Ferry; use \"builtin\" (logical replication with pgoutput)")
	default:
		return bad("cdc_backend", "is %q, want \"builtin\"", c.CDCBackend)
	}
	if c.ReplicationSlot != "" {
		s.slot = c.ReplicationSlot
	}
	if !slotName.MatchString(s.slot) {
		return bad("replication_slot", "is %q, want 1 to 63 characters of a-z, 0-9 and _", s.slot)
	}
	if c.Publication != "" {
		s.publication = c.Publication
	}
	if !slotName.MatchString(s.publication) {
		return bad("publication", "is %q, want 1 to 63 characters of a-z, 0-9 and _", s.publication)
	}
	switch strings.ToLower(c.Snapshot) {
	case "", "initial":
	case "never":
		s.snapshot = false
	default:
		return bad("snapshot", "is %q, want \"initial\" or \"never\"", c.Snapshot)
	}
	s.replicaFull = c.ReplicaIdentityFull
	if c.CaptureOperations != nil {
		s.capture = map[string]bool{}
		for i, op := range c.CaptureOperations {
			op = strings.ToUpper(op)
			switch op {
			case "INSERT", "UPDATE", "DELETE", "TRUNCATE":
				s.capture[op] = true
			default:
				return bad(fmt.Sprintf("capture_operations[%d]", i), "is %q, want INSERT, UPDATE, DELETE or TRUNCATE", c.CaptureOperations[i])
			}
		}
	}
	if s.customQuery != "" {
		return bad("custom_query", "applies to polling mode only")
	}
	return nil
}

// offsetString accepts initial_offset as a string or a number.
func offsetString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64: // TOML integers arrive as float64; exact up to 2^53
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("is %T, want a string or a number", v)
}
