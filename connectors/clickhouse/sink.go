package clickhouse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/google/uuid"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "clickhouse",
		Aliases: []string{"libiggy_connector_clickhouse_sink"},
		Summary: "inserts messages into a ClickHouse table over HTTP, one INSERT per batch, committed after ClickHouse answers",
		Spec:    Spec,
		NewSink: New,
	})
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkIdentifier(v any) error {
	if s, _ := v.(string); !identifier.MatchString(s) {
		return fmt.Errorf("%q is not a plain identifier (letters, digits and _, not starting with a digit)", s)
	}
	return nil
}

// Spec is the sink's plugin_config: upstream's keys, then Ferry's.
var Spec = connector.NewSpec(
	connector.NewStringField("url").Require().WithExample("http://localhost:8123").WithCheck(checkURL).
		WithDoc("the HTTP interface, http:// or https://"),
	connector.NewStringField("table").Require().WithExample("events").WithCheck(checkIdentifier).WithDoc("the table inserted into"),
	connector.NewStringField("database").WithDefault("default").WithCheck(checkIdentifier).WithDoc("its database"),
	connector.NewStringField("username").WithDefault("default").WithDoc("the ClickHouse user"),
	connector.NewStringField("password").AsSecret().WithDefault("").WithDoc("its password (a secret)"),
	connector.NewEnumField("insert_format", "json_each_row", "row_binary", "string").WithDefault("json_each_row").
		WithDoc("json_each_row: JSON payloads as rows; row_binary: JSON payloads encoded as RowBinary by the table's column types "+
			"(read at open), a field that does not fit dead-letters its message; string: payloads passed as they are in string_format"),
	connector.NewEnumField("string_format", "json_each_row", "csv", "tsv").WithDefault("json_each_row").
		WithDoc("the format of string payloads"),
	connector.NewIntField("timeout_seconds").AtLeast(1).WithDefault(30).WithDoc("per INSERT"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).WithDoc("retries of a failed INSERT inside one batch"),
	connector.NewIntField("retry_delay").AtLeast(0).WithDefault(1).WithDoc("seconds between retries"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each INSERT at info instead of debug"),
	connector.NewStringField("id_column").WithDefault("").WithCheck(func(v any) error {
		if v == "" {
			return nil
		}
		return checkIdentifier(v)
	}).WithDoc("Ferry: add the Iggy message id to each row under this column (json_each_row, row_binary: a UUID, String or FixedString(36) column)"),
)

func checkURL(v any) error {
	s, _ := v.(string)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("expected an http:// or https:// URL with a host")
	}
	return nil
}

var formats = map[string]string{"json_each_row": "JSONEachRow", "csv": "CSV", "tsv": "TabSeparated"}

// Sink is the clickhouse sink.
type Sink struct {
	endpoint   string // url with the INSERT query
	safeURL    string
	target     string // `db`.`table`
	database   string
	table      string
	rowBinary  bool
	columns    []column // row_binary: read by Open
	username   string
	password   string
	json       bool
	idColumn   string
	maxRetries int
	retryDelay time.Duration
	verbose    bool
	client     *http.Client
	log        *slog.Logger
}

// New builds a clickhouse sink from its configuration.
func New(cfg connector.Config) (connector.Sink, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, _ := url.Parse(set.String("url"))
	format := "JSONEachRow"
	jsonRows := set.String("insert_format") == "json_each_row"
	rowBinary := set.String("insert_format") == "row_binary"
	if !jsonRows && !rowBinary {
		format = formats[set.String("string_format")]
	}
	target := "`" + set.String("database") + "`.`" + set.String("table") + "`"
	q := u.Query()
	q.Set("query", "INSERT INTO "+target+" FORMAT "+format)
	u.RawQuery = q.Encode()
	safe := *u
	safe.User, safe.RawQuery = nil, ""
	return &Sink{
		endpoint: u.String(), safeURL: safe.String(), target: target,
		database: set.String("database"), table: set.String("table"), rowBinary: rowBinary,
		username: set.String("username"), password: set.String("password"), json: jsonRows,
		idColumn: set.String("id_column"), maxRetries: set.Int("max_retries"),
		retryDelay: time.Duration(set.Int("retry_delay")) * time.Second, verbose: set.Bool("verbose_logging"),
		client: &http.Client{Timeout: time.Duration(set.Int("timeout_seconds")) * time.Second}, log: log,
	}, nil
}

// Open checks that the server answers and the table exists; for
// row_binary it reads the table's columns and checks their types.
func (s *Sink) Open(ctx context.Context) error {
	if _, err := s.post(ctx, s.endpointFor("EXISTS TABLE "+s.target), nil); err != nil {
		return err
	}
	if !s.rowBinary {
		return nil
	}
	cols, err := s.fetchColumns(ctx)
	if err != nil {
		return err
	}
	s.columns = cols
	return nil
}

func (s *Sink) endpointFor(query string) string {
	u, _ := url.Parse(s.endpoint)
	q := u.Query()
	q.Set("query", query)
	u.RawQuery = q.Encode()
	return u.String()
}

// Close releases idle connections.
func (s *Sink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

// Consume inserts the batch with one INSERT (see the package doc). A
// row ClickHouse refuses is taken out and the INSERT sent again without
// it, so only refused rows are reported.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	failed := connector.MessageErrors{}
	if s.rowBinary {
		if s.columns == nil {
			return errors.New("clickhouse: row_binary sink used before Open")
		}
		if err := s.consumeRowBinary(ctx, b, failed); err != nil {
			return err
		}
	} else {
		todo := make([]int, 0, len(b.Messages))
		for i := range b.Messages {
			if err := s.checkRow(&b.Messages[i]); err != nil {
				failed[i] = connector.Permanent(err)
				continue
			}
			todo = append(todo, i)
		}
		rows := func(todo []int) []byte { return s.rows(b, todo) }
		if err := s.insert(ctx, s.endpoint, todo, rows, failed); err != nil {
			return err
		}
	}
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "inserted batch", "table", s.target, "rows", len(b.Messages)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// insert sends the rows todo (body encodes them) with one INSERT, taking
// out a row ClickHouse refuses (into failed) and retrying the others.
func (s *Sink) insert(ctx context.Context, endpoint string, todo []int, body func([]int) []byte, failed connector.MessageErrors) error {
	retry := backoff.Backoff{Min: s.retryDelay, Max: s.retryDelay}
	for attempt := 0; len(todo) > 0; {
		_, err := s.post(ctx, endpoint, body(todo))
		if err == nil {
			break
		}
		var rowErr *badRowError
		if errors.As(err, &rowErr) && rowErr.row >= 1 && rowErr.row <= len(todo) {
			// The INSERT is atomic: nothing of it was written.
			k := rowErr.row - 1
			failed[todo[k]] = connector.Permanent(rowErr)
			todo = append(todo[:k], todo[k+1:]...)
			continue
		}
		if ctx.Err() != nil || attempt >= s.maxRetries {
			return err
		}
		attempt++
		s.log.Warn("insert failed; retrying", "table", s.target, "error", err, "attempt", attempt)
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return err
		}
	}
	return nil
}

// checkRow says why m can be no JSON row, or nil (string mode takes
// anything).
func (s *Sink) checkRow(m *connector.Message) error {
	if !s.json {
		return nil
	}
	if !json.Valid(m.Payload) {
		return errors.New("the payload is not JSON")
	}
	if p := bytes.TrimLeft(m.Payload, " \t\r\n"); len(p) == 0 || p[0] != '{' {
		return errors.New("the payload is not a JSON object, so it is no row")
	}
	return nil
}

// rows is the INSERT body of the messages todo: one payload per line
// (JSON compacted, with the id column when asked).
func (s *Sink) rows(b *connector.SinkBatch, todo []int) []byte {
	var buf bytes.Buffer
	for _, i := range todo {
		m := &b.Messages[i]
		if !s.json {
			buf.Write(bytes.TrimRight(m.Payload, "\r\n"))
			buf.WriteByte('\n')
			continue
		}
		start := buf.Len()
		_ = json.Compact(&buf, m.Payload) // checked by checkRow
		if s.idColumn != "" {
			row := append([]byte(nil), buf.Bytes()[start:]...)
			buf.Truncate(start)
			fmt.Fprintf(&buf, `{%q:%q`, s.idColumn, uuid.UUID(m.ID).String())
			if len(row) > 2 {
				buf.WriteByte(',')
			}
			buf.Write(row[1:])
		}
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// badRowError is ClickHouse refusing one row of an INSERT.
type badRowError struct {
	row  int // 1-based, as ClickHouse counts
	text string
}

func (e *badRowError) Error() string { return "ClickHouse refused the row: " + e.text }

var atRow = regexp.MustCompile(`\(at row (\d+)\)`)
var chCode = regexp.MustCompile(`^Code: (\d+)`)

// post sends one request and classifies the answer.
func (s *Sink) post(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	req.SetBasicAuth(s.username, s.password)
	resp, err := s.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.EOF) || ctx.Err() == nil {
			return nil, connector.Unavailable(fmt.Errorf("ClickHouse at %s: %w", s.safeURL, scrub(err, s.password)))
		}
		return nil, fmt.Errorf("ClickHouse at %s: %w", s.safeURL, scrub(err, s.password))
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		return out, nil
	}
	text := strings.TrimSpace(string(out))
	if i := strings.Index(text, ", e.what()"); i > 0 {
		text = text[:i]
	}
	switch {
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout:
		return nil, connector.Unavailable(fmt.Errorf("ClickHouse at %s answered %d: %s", s.safeURL, resp.StatusCode, text))
	}
	if m := atRow.FindStringSubmatch(text); m != nil && isDataError(text) {
		n, _ := strconv.Atoi(m[1])
		return nil, &badRowError{row: n, text: text}
	}
	return nil, fmt.Errorf("ClickHouse at %s answered %d: %s", s.safeURL, resp.StatusCode, text)
}

// isDataError reports whether ClickHouse's error code is about the data
// of a row (parsing, a type, a value), not the table or the server.
func isDataError(text string) bool {
	m := chCode.FindStringSubmatch(text)
	if m == nil {
		return false
	}
	switch m[1] {
	case "6", "25", "26", "27", "32", "38", "41", "53", "69", "70", "72", "117", "130", "131", "321":
		return true
	}
	return false
}

// scrub removes the password from an error's text (net/url errors quote
// the URL, which holds no password here, but a proxy error might).
func scrub(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "****"))
}
