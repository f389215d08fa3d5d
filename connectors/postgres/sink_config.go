package postgres

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SinkConfig is the postgres sink's plugin_config. Keys without a
// "Ferry:" note are upstream's (libiggy_connector_postgres_sink).
type SinkConfig struct {
	Connection
	// TargetTable is "table" or "schema.table".
	TargetTable string `json:"target_table"`
	// BatchSize is the most rows per INSERT (default 1000; upstream 100).
	BatchSize       *uint32 `json:"batch_size"`
	AutoCreateTable bool    `json:"auto_create_table"`
	// IncludeMetadata adds iggy_offset, iggy_timestamp, iggy_stream,
	// iggy_topic and iggy_partition_id (default true).
	IncludeMetadata        *bool `json:"include_metadata"`
	IncludeChecksum        *bool `json:"include_checksum"`
	IncludeOriginTimestamp *bool `json:"include_origin_timestamp"`
	// PayloadFormat is the payload column's type: bytea (default), json
	// (jsonb) or text.
	PayloadFormat  string              `json:"payload_format"`
	VerboseLogging bool                `json:"verbose_logging"`
	MaxRetries     *uint32             `json:"max_retries"`
	RetryDelay     *connector.Duration `json:"retry_delay"`

	// TargetSchema qualifies target_table (Ferry); then target_table is
	// taken whole, dots included.
	TargetSchema string `json:"target_schema"`
	// FieldMappings writes JSON payload fields to columns: column name →
	// field path (gjson syntax: "user.id", "items.0", "a\.b") (Ferry).
	FieldMappings map[string]string `json:"field_mappings"`
	// FieldTypes are the mapped columns' SQL types for auto_create_table
	// (default jsonb) (Ferry).
	FieldTypes map[string]string `json:"field_types"`
	// IncludePayload writes the payload column (default true) (Ferry).
	IncludePayload *bool `json:"include_payload"`
	// DedupeBy is the unique key that makes replays harmless: "id" (the
	// message id, the default) or "offset" (stream, topic, partition,
	// offset) (Ferry).
	DedupeBy string `json:"dedupe_by"`
	// InsertMethod is "copy" (COPY into a temporary table, then INSERT ...
	// SELECT ... ON CONFLICT DO NOTHING; the default, about 40% faster) or
	// "values" (multi-row INSERT ... ON CONFLICT DO NOTHING) (Ferry).
	InsertMethod string `json:"insert_method"`
}

type sinkPayload int

const (
	payloadBytea sinkPayload = iota
	payloadJSON
	payloadText
)

// sinkSettings is a validated SinkConfig with defaults applied.
type sinkSettings struct {
	table           []string // identifier parts
	batchSize       int
	autoCreate      bool
	meta, checksum  bool
	origin, payload bool
	format          sinkPayload
	mappings        []mapping
	dedupeByOffset  bool
	copy            bool
	verbose         bool
	maxRetries      int
	retryDelay      time.Duration
}

type mapping struct {
	column, path, sqlType string
}

// sqlType accepts type names such as "bigint", "numeric(10, 2)",
// "timestamp with time zone" and "text[]": letters, digits, spaces, one
// optional (n[, m]) and [] suffixes.
var sqlType = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\s*\[\])*$`)

func (c *SinkConfig) settings(p connector.PluginConfig) (*sinkSettings, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: plugin_config.%s %s", p.Source, key, fmt.Sprintf(format, args...))
	}
	s := &sinkSettings{batchSize: 1000, meta: true, checksum: true, origin: true, payload: true,
		maxRetries: 3, retryDelay: time.Second, autoCreate: c.AutoCreateTable, verbose: c.VerboseLogging}
	if err := p.Required("target_table", c.TargetTable); err != nil {
		return nil, err
	}
	switch {
	case c.TargetSchema != "":
		s.table = []string{c.TargetSchema, c.TargetTable}
	default:
		s.table = tableIdent(c.TargetTable)
	}
	if c.BatchSize != nil {
		if *c.BatchSize == 0 || *c.BatchSize > 5000 {
			return nil, bad("batch_size", "is %d, want 1 to 5000", *c.BatchSize)
		}
		s.batchSize = int(*c.BatchSize)
	}
	for _, b := range []struct {
		v   *bool
		dst *bool
	}{{c.IncludeMetadata, &s.meta}, {c.IncludeChecksum, &s.checksum}, {c.IncludeOriginTimestamp, &s.origin}, {c.IncludePayload, &s.payload}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	switch strings.ToLower(c.PayloadFormat) {
	case "", "bytea", "raw":
	case "json", "jsonb":
		s.format = payloadJSON
	case "text":
		s.format = payloadText
	default:
		return nil, bad("payload_format", "is %q, want bytea, json or text", c.PayloadFormat)
	}
	cols := make([]string, 0, len(c.FieldMappings))
	for col := range c.FieldMappings {
		cols = append(cols, col)
	}
	sort.Strings(cols)
	for _, col := range cols {
		path := c.FieldMappings[col]
		if col == "" || path == "" {
			return nil, bad("field_mappings", "has an empty column name or path (%q = %q)", col, path)
		}
		typ := firstNonEmpty(c.FieldTypes[col], "jsonb")
		if !sqlType.MatchString(typ) {
			return nil, bad("field_types."+col, "is %q, not a type name such as bigint, text or numeric(10, 2)", typ)
		}
		s.mappings = append(s.mappings, mapping{column: col, path: path, sqlType: typ})
	}
	for col := range c.FieldTypes {
		if _, ok := c.FieldMappings[col]; !ok {
			return nil, bad("field_types."+col, "names no column of field_mappings")
		}
	}
	if !s.payload && len(s.mappings) == 0 {
		return nil, bad("include_payload", "is false and field_mappings is empty: nothing would be written")
	}
	switch strings.ToLower(c.DedupeBy) {
	case "", "id":
	case "offset":
		if !s.meta {
			return nil, bad("dedupe_by", "is \"offset\", which needs include_metadata = true")
		}
		s.dedupeByOffset = true
	default:
		return nil, bad("dedupe_by", "is %q, want \"id\" or \"offset\"", c.DedupeBy)
	}
	s.copy = true
	switch strings.ToLower(c.InsertMethod) {
	case "", "copy":
	case "values":
		s.copy = false
	default:
		return nil, bad("insert_method", "is %q, want \"values\" or \"copy\"", c.InsertMethod)
	}
	if c.MaxRetries != nil {
		s.maxRetries = int(*c.MaxRetries)
	}
	if c.RetryDelay != nil {
		s.retryDelay = c.RetryDelay.D()
	}
	return s, nil
}
