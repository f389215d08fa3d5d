package influxdb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "influxdb",
		Aliases:   []string{"libiggy_connector_influxdb_source"},
		Summary:   "polls InfluxDB with a Flux query from a time cursor that never skips rows sharing a time",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

const epoch = "1970-01-01T00:00:00Z"

func checkRFC3339(v any) error {
	s, _ := v.(string)
	if s == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return errors.New("expected an RFC 3339 time with a zone, such as 2024-01-01T00:00:00Z")
	}
	return nil
}

// SourceSpec is the source's plugin_config: upstream's keys (version v2).
var SourceSpec = connector.NewSpec(append([]connector.Field{
	connector.NewEnumField("version", "v2", "v3").WithDefault("v2").WithCheck(checkVersion).
		WithDoc("the query API: v2 (Flux on /api/v2/query: InfluxDB 2.x, and 1.8+ with flux-enabled)"),
	connector.NewStringField("url").Require().WithExample("http://localhost:8086").WithCheck(checkURL).
		WithDoc("the server, http:// or https://"),
	connector.NewStringField("org").Require().WithExample("my-org").WithDoc("the organization (1.8 ignores it)"),
	connector.NewStringField("token").Require().AsSecret().WithExample("my-token").
		WithDoc("an API token with read access (1.8: \"user:password\", or anything with auth off); a secret"),
	connector.NewStringField("query").Require().
		WithExample(`from(bucket: "telemetry") |> range(start: time(v: "$cursor")) |> group(columns: []) |> sort(columns: ["_time", "host"]) |> limit(n: $limit)`).
		WithCheck(func(v any) error {
			if !strings.Contains(v.(string), "$cursor") {
				return errors.New("expected a Flux query holding $cursor, as in range(start: time(v: \"$cursor\"))")
			}
			return nil
		}).WithDoc("the Flux query; $cursor is the time to start at (inclusive), $limit batch_size plus the rows of that time already emitted"),
	connector.NewDurationField("poll_interval").WithDefault(5 * time.Second).WithDoc("wait after a query that brought nothing"),
	connector.NewIntField("batch_size").Between(0, 1<<31).WithDefault(500).WithDoc("rows per query (0 is 1)"),
	connector.NewStringField("cursor_field").WithDefault("_time").WithCheck(func(v any) error {
		if v != "_time" {
			return errors.New(`expected "_time", the Flux time column (v2)`)
		}
		return nil
	}).WithDoc("the time column the cursor follows"),
	connector.NewStringField("initial_offset").WithDefault("").WithCheck(checkRFC3339).
		WithDoc("the cursor of the first run (RFC 3339); default 1970-01-01T00:00:00Z"),
	connector.NewStringField("payload_column").WithDefault("").
		WithDoc("a column to send as the payload, in payload_format; default the whole row as upstream's JSON envelope"),
	connector.NewEnumField("payload_format", "json", "text", "raw").WithDefault("json").
		WithAliases(map[string]string{"utf8": "text", "base64": "raw"}).
		WithDoc("how payload_column is read: json (parsed), text (as it is), raw (base64-decoded)"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("the envelope's row holds every column (else only _time and _value)"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each query at info instead of debug"),
}, resilienceFields(10*time.Second)...)...)

// sourceState is upstream's V2 checkpoint, JSON, with Ferry's
// cursor_row_ids: which rows at last_timestamp were emitted.
type sourceState struct {
	Version        string   `json:"version"`
	LastTimestamp  string   `json:"last_timestamp,omitempty"`
	ProcessedRows  uint64   `json:"processed_rows"`
	CursorRowCount uint64   `json:"cursor_row_count"`
	CursorRowIDs   []string `json:"cursor_row_ids,omitempty"`
}

// Source is the influxdb source.
type Source struct {
	c          *client
	org, query string
	interval   time.Duration
	batchSize  int
	column     string
	format     string
	meta       bool
	verbose    bool
	breaker    *breaker
	log        *slog.Logger

	cursor  time.Time       // start of the next query
	seen    map[uint64]bool // keys (rowKey) of the rows at cursor already emitted
	skip    uint64          // a count-only state's rows at cursor to skip by place (upstream's, or Ferry's before cursor_row_ids)
	horizon time.Time       // the latest time an earlier query saw: rows up to it are all visible now
	rows    uint64          // processed_rows
	wait    bool            // wait poll_interval before the next query
}

// NewSource builds an influxdb source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := &Source{
		c: newClient(set, cfg.Logger), org: set.String("org"), query: set.String("query"),
		interval: set.Duration("poll_interval"), batchSize: max(1, set.Int("batch_size")),
		column: set.String("payload_column"), format: set.String("payload_format"), meta: set.Bool("include_metadata"),
		verbose: set.Bool("verbose_logging") || cfg.Verbose, log: cfg.Logger,
		breaker: &breaker{threshold: set.Int("circuit_breaker_threshold"), coolDown: set.Duration("circuit_breaker_cool_down")},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	start := set.String("initial_offset")
	if start == "" {
		start = epoch
	}
	s.cursor, _ = time.Parse(time.RFC3339Nano, start)
	if !strings.Contains(s.query, "sort(") {
		s.log.Warn("the InfluxDB query has no sort(): rows must come in time order, or limit() may cut some that are then skipped")
	}
	return s, nil
}

// Open restores the cursor from the saved state and checks the server's
// health.
func (s *Source) Open(ctx context.Context, state []byte) error {
	if state != nil {
		var st sourceState
		if err := json.Unmarshal(state, &st); err != nil {
			return fmt.Errorf("influxdb: saved state %q: %w", state, err)
		}
		if st.Version != "" && st.Version != "v2" {
			return fmt.Errorf("influxdb: saved state of version %q; this source is v2", st.Version)
		}
		if st.LastTimestamp != "" {
			t, err := time.Parse(time.RFC3339Nano, st.LastTimestamp)
			if err != nil {
				return fmt.Errorf("influxdb: saved state's last_timestamp: %w", err)
			}
			s.cursor = t
		}
		s.rows = st.ProcessedRows
		s.seen = make(map[uint64]bool, len(st.CursorRowIDs))
		for _, h := range st.CursorRowIDs {
			k, err := strconv.ParseUint(h, 16, 64)
			if err != nil {
				return fmt.Errorf("influxdb: saved state's cursor_row_ids: %w", err)
			}
			s.seen[k] = true
		}
		if len(st.CursorRowIDs) == 0 {
			s.skip = st.CursorRowCount
		}
	}
	return s.c.health(ctx)
}

// Close releases idle connections.
func (s *Source) Close(context.Context) error {
	s.c.http.CloseIdleConnections()
	return nil
}

// Poll queries from the cursor until rows come, waiting poll_interval
// after a query that brought nothing new: a query that saw rows past the
// horizon but could not emit them yet is followed by another at once.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if s.wait {
			if err := backoff.Sleep(ctx, s.interval); err != nil {
				return nil, err
			}
		}
		s.wait = true
		if s.breaker.open() {
			continue
		}
		rows, err := s.fetch(ctx)
		s.breaker.record(err == nil)
		if err != nil {
			return nil, err
		}
		b, moved, err := s.batch(rows)
		if err != nil {
			return nil, err
		}
		if len(b.Messages) > 0 || moved {
			s.wait = false // more may be waiting, or visible to the next query
		}
		if len(b.Messages) > 0 {
			return b, nil
		}
	}
}

// fetch runs the query from the cursor.
func (s *Source) fetch(ctx context.Context) ([]row, error) {
	limit := uint64(s.batchSize) + uint64(len(s.seen)) + s.skip
	q := strings.ReplaceAll(s.query, "$cursor", s.cursor.UTC().Format(time.RFC3339Nano))
	q = strings.ReplaceAll(q, "$limit", strconv.FormatUint(limit, 10))
	body, _ := json.Marshal(map[string]any{
		"query": q,
		"dialect": map[string]any{"annotations": []string{"datatype", "group", "default"}, "delimiter": ",",
			"header": true, "commentPrefix": "#"},
	})
	var out []byte
	err := s.c.retry(ctx, "InfluxDB query", func() error {
		var err error
		out, err = s.c.do(ctx, http.MethodPost, "/api/v2/query", url.Values{"org": {s.org}}, body,
			http.Header{"Content-Type": {"application/json"}, "Accept": {"text/csv"}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("influxdb: query from %s: %w", s.cursor.UTC().Format(time.RFC3339Nano), err)
	}
	rows, err := parseCSV(out)
	if err != nil {
		return nil, fmt.Errorf("influxdb: %w", err)
	}
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "queried InfluxDB", "cursor", s.cursor.UTC().Format(time.RFC3339Nano), "limit", limit, "rows", len(rows))
	return rows, nil
}

// payload is the message of a row: payload_column in payload_format, or
// upstream's envelope.
func (s *Source) payload(r row) ([]byte, error) {
	if s.column != "" {
		cell, ok := r[s.column]
		if !ok {
			return nil, fmt.Errorf("influxdb: the query's rows have no payload_column %q", s.column)
		}
		switch s.format {
		case "text":
			return []byte(cell), nil
		case "raw":
			p, err := base64.StdEncoding.DecodeString(cell)
			if err != nil {
				return nil, fmt.Errorf("influxdb: payload_column %q is not base64: %w", s.column, err)
			}
			return p, nil
		}
		var v any
		if err := json.Unmarshal([]byte(cell), &v); err != nil {
			return nil, fmt.Errorf("influxdb: payload_column %q is not JSON: %w", s.column, err)
		}
		return json.Marshal(v)
	}
	inner := map[string]any{}
	for k, v := range r {
		if s.meta || k == "_time" || k == "_value" {
			inner[k] = scalar(v)
		}
	}
	return json.Marshal(map[string]any{
		"measurement": r["_measurement"], "field": r["_field"], "timestamp": r["_time"],
		"value": scalar(r["_value"]), "row": inner,
	})
}
