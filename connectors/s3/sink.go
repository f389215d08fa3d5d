package s3

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/minio/minio-go/v7"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "s3",
		Aliases: []string{"libiggy_connector_s3_sink"},
		Summary: "writes messages to S3 objects keyed by their offset range, committed after the upload is confirmed",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// minPartSize is S3's smallest multipart part.
const minPartSize = 5 << 20

// SinkSpec is the sink's plugin_config: upstream's keys
// (libiggy_connector_s3_sink), then Ferry's.
var SinkSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringField("path_template").WithDefault("{stream}/{topic}/{date}/{hour}").WithCheck(checkTemplate).
		WithDoc("the key's directories: {stream} {topic} {partition} {date} {hour} {timestamp} (names escaped)"),
	connector.NewEnumField("file_rotation", "size", "messages").WithDefault("size").
		WithDoc("start a new object after max_file_size bytes or max_messages_per_file messages (within a batch)"),
	connector.NewSizeField("max_file_size").AtLeast(1).WithDefault(int64(8<<20)).WithDoc("with file_rotation = \"size\""),
	connector.NewIntField("max_messages_per_file").AtLeast(1).WithDoc("with file_rotation = \"messages\" (then required)"),
	connector.NewEnumField("output_format", formatJSONLines, formatJSONArray, formatRaw).WithDefault(formatJSONLines).
		WithAliases(map[string]string{"jsonl": formatJSONLines, "jsonlines": formatJSONLines, "json": formatJSONArray}).
		WithDoc("json_lines (.jsonl), json_array (.json) or raw payloads, one per line (.bin)"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add offset, timestamp, stream, topic and partition_id to each JSON record"),
	connector.NewBoolField("include_headers").WithDefault(false).WithDoc("add the message's headers to each JSON record"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).
		WithDoc("attempts of an upload within one batch (upstream counts attempts)"),
	connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("first wait between attempts, doubling up to 60 s"),
	connector.NewIntField("max_attempts").Between(0, math.MaxUint32).
		WithDoc("Ferry: upstream's example file's spelling of max_retries; used when max_retries is not set"),
	connector.NewSizeField("part_size").AtLeast(minPartSize).WithDefault(int64(16<<20)).
		WithDoc("Ferry: objects larger than this are sent as a multipart upload of parts this size (at least 5 MiB)"),
)...).Lint(lintCredentials).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if s.String("file_rotation") == "messages" && !s.Has("max_messages_per_file") {
		fail("max_messages_per_file", `required with file_rotation = "messages"`)
	}
})

var contentTypes = map[string]string{formatJSONLines: "application/x-ndjson", formatJSONArray: "application/json",
	formatRaw: "application/octet-stream"}

// Sink is the s3 sink.
type Sink struct {
	conn            *bucketConn
	transport       *http.Transport
	prefix          string
	template        string
	format          string
	bySize          bool
	maxSize         int64
	maxMessages     int
	includeMetadata bool
	includeHeaders  bool
	attempts        int
	retryDelay      time.Duration
	partSize        uint64
	verbose         bool
	log             *slog.Logger

	mu    sync.Mutex
	clean map[partitionKey]bool // the last Consume of the partition succeeded
}

type partitionKey struct {
	stream, topic string
	partition     uint32
}

// NewSink builds an s3 sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	if err := checkPrefix(set.String("prefix")); err != nil {
		return nil, set.Errorf("prefix", "%v", err)
	}
	transport, err := minio.DefaultTransport(strings.HasPrefix(set.String("endpoint"), "https://") || set.String("endpoint") == "")
	if err != nil {
		return nil, fmt.Errorf("s3 sink: transport: %w", err)
	}
	conn, err := dial(set, transport)
	if err != nil {
		return nil, err
	}
	attempts := set.Int("max_retries")
	if !set.Has("max_retries") && set.Has("max_attempts") {
		attempts = set.Int("max_attempts")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{
		conn: conn, transport: transport, prefix: strings.Trim(set.String("prefix"), "/"),
		template: set.String("path_template"), format: set.String("output_format"),
		bySize: set.String("file_rotation") == "size", maxSize: set.Size("max_file_size"),
		maxMessages: set.Int("max_messages_per_file"), includeMetadata: set.Bool("include_metadata"),
		includeHeaders: set.Bool("include_headers"), attempts: max(1, attempts), retryDelay: set.Duration("retry_delay"),
		partSize: uint64(set.Size("part_size")), verbose: cfg.Verbose, log: log, clean: map[partitionKey]bool{},
	}, nil
}

// Open checks that the bucket exists and the keys may use it.
func (s *Sink) Open(ctx context.Context) error { return s.conn.check(ctx) }

// Close releases idle connections.
func (s *Sink) Close(context.Context) error {
	s.transport.CloseIdleConnections()
	return nil
}

// unit is one object of a batch: messages [from, to) and its bytes.
type unit struct {
	from, to int
	body     []byte
}

// split cuts a batch into objects by the rotation rule, counting from
// the batch's first message, so that the same messages from the same
// first offset always make the same objects.
func (s *Sink) split(b *connector.SinkBatch) []unit {
	var units []unit
	var buf bytes.Buffer
	start := 0
	end := func(to int) {
		if s.format == formatJSONArray {
			buf.WriteByte(']')
		}
		units = append(units, unit{from: start, to: to, body: bytes.Clone(buf.Bytes())})
		buf.Reset()
		start = to
	}
	for i := range b.Messages {
		switch {
		case s.format == formatJSONArray && i == start:
			buf.WriteByte('[')
		case s.format == formatJSONArray:
			buf.WriteByte(',')
		}
		s.record(&buf, b, &b.Messages[i])
		if s.format != formatJSONArray {
			buf.WriteByte('\n')
		}
		if s.bySize && int64(buf.Len()) >= s.maxSize || !s.bySize && i+1-start >= s.maxMessages {
			end(i + 1)
		}
	}
	if start < len(b.Messages) {
		end(len(b.Messages))
	}
	return units
}

// Consume uploads the batch as one object per rotation unit, each keyed
// by its offset range, and returns only when every upload is confirmed.
// After a failure (or at the first batch of a partition) it also removes
// objects an earlier attempt left that start at the same offset and end
// within the new one: see the package doc.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if len(b.Messages) == 0 {
		return nil
	}
	pk := partitionKey{b.Stream, b.Topic, b.Partition}
	s.mu.Lock()
	replay := !s.clean[pk]
	s.clean[pk] = false
	s.mu.Unlock()
	for _, u := range s.split(b) {
		first, last := &b.Messages[u.from], &b.Messages[u.to-1]
		dir := s.keyDir(b, first)
		key := dir + "/" + s.objectName(first.Offset, last.Offset)
		if err := s.upload(ctx, key, u.body); err != nil {
			return err
		}
		if replay {
			if err := s.removeStale(ctx, dir, first.Offset, last.Offset, key); err != nil {
				return err
			}
		}
		level := slog.LevelDebug
		if s.verbose {
			level = slog.LevelInfo
		}
		s.log.Log(ctx, level, "uploaded object", "key", key, "messages", u.to-u.from, "bytes", len(u.body))
	}
	s.mu.Lock()
	s.clean[pk] = true
	s.mu.Unlock()
	return nil
}

// upload puts one object, retrying what a retry may fix.
func (s *Sink) upload(ctx context.Context, key string, body []byte) error {
	retry := backoff.Backoff{Min: s.retryDelay, Max: time.Minute, Jitter: 0.2}
	for attempt := 1; ; attempt++ {
		_, err := s.conn.client.PutObject(ctx, s.conn.bucket, key, bytes.NewReader(body), int64(len(body)),
			minio.PutObjectOptions{ContentType: contentTypes[s.format], PartSize: s.partSize})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		again := retriable(err)
		err = fmt.Errorf("upload %s to %s: %s", key, s.conn.where, describe(err))
		if attempt >= s.attempts || !again {
			return s.conn.classify(err)
		}
		s.log.Warn("upload failed; retrying", "key", key, "error", err, "attempt", attempt)
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return ctx.Err()
		}
	}
}

// retriable: a connection failure, 5xx, 408 or 429 (upstream's rule).
func retriable(err error) bool {
	r := minio.ToErrorResponse(err)
	if r.StatusCode == 0 {
		return true
	}
	return r.StatusCode >= 500 || r.StatusCode == http.StatusRequestTimeout || r.StatusCode == http.StatusTooManyRequests
}

// removeStale deletes the objects of dir that start at first and end at
// or before last, other than key: what an earlier attempt at this batch
// uploaded before the sink stopped or the batch was cut shorter.
func (s *Sink) removeStale(ctx context.Context, dir string, first, last uint64, key string) error {
	prefix := dir + "/" + startName(first)
	for o := range s.conn.client.ListObjects(ctx, s.conn.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if o.Err != nil {
			return s.conn.classify(fmt.Errorf("list %s at %s: %s", prefix, s.conn.where, describe(o.Err)))
		}
		if o.Key == key {
			continue
		}
		end, err := strconv.ParseUint(strings.SplitN(strings.TrimPrefix(o.Key, prefix), ".", 2)[0], 10, 64)
		if err != nil || end > last {
			s.log.Warn("an object of an earlier attempt overlaps this one and goes further; it is kept", "object", o.Key, "key", key)
			continue
		}
		if err := s.conn.client.RemoveObject(ctx, s.conn.bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			return s.conn.classify(fmt.Errorf("remove %s at %s: %s", o.Key, s.conn.where, describe(err)))
		}
		s.log.Info("removed the object of an earlier attempt", "object", o.Key, "replaced_by", key)
	}
	return nil
}

var _ connector.Sink = (*Sink)(nil)
