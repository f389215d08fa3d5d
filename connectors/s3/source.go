package s3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/minio/minio-go/v7"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "s3",
		Aliases:   []string{"libiggy_connector_s3_source"},
		Summary:   "reads the objects under an S3 prefix in key order, as lines or whole, resuming within an object",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// Source formats.
const (
	readLines     = "lines"
	readJSONLines = "json_lines"
	readWhole     = "whole"
)

// SourceSpec is the source's plugin_config (Ferry's; upstream has no S3
// source). The connection keys are the sink's.
var SourceSpec = connector.NewSpec(append(connectionFields(),
	connector.NewEnumField("format", readJSONLines, readLines, readWhole).WithDefault(readJSONLines).
		WithAliases(map[string]string{"ndjson": readJSONLines, "jsonl": readJSONLines}).
		WithDoc("json_lines: a JSON message per line; lines: a text message per line; whole: an object is one raw message"),
	connector.NewIntField("batch_size").Between(1, 100000).WithDefault(100).WithDoc("most messages per batch (a batch never spans objects)"),
	connector.NewDurationField("poll_interval").WithDefault(time.Second).WithDoc("how often the prefix is listed again when every object was read"),
	connector.NewEnumField("after_read", "none", "delete", "move").WithDefault("none").
		WithDoc("what happens to an object once all of it is in Iggy"),
	connector.NewStringField("move_prefix").WithDefault("").WithCheck(checkPrefix).
		WithDoc(`with after_read = "move": objects are moved under this prefix (never read again)`),
	connector.NewSizeField("max_object_size").AtLeast(1).WithDefault(int64(10<<20)).
		WithDoc(`with format = "whole": a larger object is an error, not a message`),
)...).Lint(lintCredentials).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if s.String("after_read") == "move" && strings.Trim(s.String("move_prefix"), "/") == "" {
		fail("move_prefix", `required with after_read = "move"`)
	}
})

// position is the source's state: the object read last and how far.
type position struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"` // bytes of Key delivered
	Done   bool   `json:"done"`   // all of Key is delivered
}

// Source is the s3 source.
type Source struct {
	conn         *bucketConn
	transport    *http.Transport
	prefix       string
	format       string
	batchSize    int
	pollInterval time.Duration
	afterRead    string
	movePrefix   string
	maxObject    int64
	log          *slog.Logger

	pos position // what the batches polled so far end at
	cur *reader  // the object being read, at pos
}

type reader struct {
	obj *minio.Object
	r   *bufio.Reader
}

// NewSource builds an s3 source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	if err := checkPrefix(set.String("prefix")); err != nil {
		return nil, set.Errorf("prefix", "%v", err)
	}
	transport, err := minio.DefaultTransport(strings.HasPrefix(set.String("endpoint"), "https://") || set.String("endpoint") == "")
	if err != nil {
		return nil, fmt.Errorf("s3 source: transport: %w", err)
	}
	conn, err := dial(set, transport)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	move := strings.Trim(set.String("move_prefix"), "/")
	if move != "" {
		move += "/"
	}
	return &Source{
		conn: conn, transport: transport, prefix: strings.TrimLeft(set.String("prefix"), "/"), format: set.String("format"),
		batchSize: set.Int("batch_size"), pollInterval: set.Duration("poll_interval"), afterRead: set.String("after_read"),
		movePrefix: move, maxObject: set.Size("max_object_size"), log: log,
	}, nil
}

// Open checks the bucket and resumes from state. An object whose last
// batch was saved but whose delete or move a crash prevented is deleted
// or moved now.
func (s *Source) Open(ctx context.Context, state []byte) error {
	if state != nil {
		if err := json.Unmarshal(state, &s.pos); err != nil {
			return fmt.Errorf("s3 source: state %q: %w", state, err)
		}
	}
	if err := s.conn.check(ctx); err != nil {
		return err
	}
	if s.pos.Done && s.pos.Key != "" {
		return s.finish(ctx, s.pos.Key)
	}
	return nil
}

// Close closes the object being read.
func (s *Source) Close(context.Context) error {
	s.closeReader()
	s.transport.CloseIdleConnections()
	return nil
}

func (s *Source) closeReader() {
	if s.cur != nil {
		s.cur.obj.Close()
		s.cur = nil
	}
}

// Poll returns the next batch of the object being read, or of the next
// object in key order, waiting poll_interval between listings.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if s.cur == nil {
			if s.pos.Key == "" || s.pos.Done {
				next, err := s.next(ctx)
				if err != nil {
					return nil, err
				}
				if next == "" {
					if err := backoff.Sleep(ctx, s.pollInterval); err != nil {
						return nil, err
					}
					continue
				}
				s.pos = position{Key: next}
			}
			if err := s.open(ctx); err != nil {
				return nil, err
			}
		}
		b, err := s.read()
		if err != nil {
			s.closeReader()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.conn.classify(fmt.Errorf("read %s from %s: %s", s.pos.Key, s.conn.where, describe(err)))
		}
		return b, nil
	}
}

// next lists the first key after the last one read; "" when none.
func (s *Source) next(ctx context.Context) (string, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range s.conn.client.ListObjects(lctx, s.conn.bucket, minio.ListObjectsOptions{
		Prefix: s.prefix, StartAfter: s.pos.Key, Recursive: true}) {
		if o.Err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", s.conn.classify(fmt.Errorf("list %s at %s: %s", s.prefix, s.conn.where, describe(o.Err)))
		}
		if o.Key <= s.pos.Key || s.movePrefix != "" && strings.HasPrefix(o.Key, s.movePrefix) || strings.HasSuffix(o.Key, "/") {
			continue
		}
		return o.Key, nil
	}
	return "", nil
}

// open opens pos.Key at pos.Offset; an object gone since counts as read.
func (s *Source) open(ctx context.Context) error {
	opts := minio.GetObjectOptions{}
	if s.pos.Offset > 0 {
		if err := opts.SetRange(s.pos.Offset, 0); err != nil {
			return fmt.Errorf("s3 source: range of %s: %w", s.pos.Key, err)
		}
	}
	obj, err := s.conn.client.GetObject(ctx, s.conn.bucket, s.pos.Key, opts)
	if err == nil {
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		switch minio.ToErrorResponse(err).Code {
		case "NoSuchKey", "InvalidRange":
			s.log.Info("object gone or read whole; going on", "key", s.pos.Key)
			s.pos.Done = true
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.conn.classify(fmt.Errorf("open %s at %s: %s", s.pos.Key, s.conn.where, describe(err)))
	}
	s.cur = &reader{obj: obj, r: bufio.NewReaderSize(obj, 64<<10)}
	return nil
}

// read reads the next batch of the open object (or, when it is done,
// an empty batch that saves that).
func (s *Source) read() (*connector.Batch, error) {
	if s.cur == nil { // opened an object that is gone
		return s.batch(connector.SchemaRaw, nil, s.pos), nil
	}
	pos := s.pos
	var msgs []connector.Message
	if s.format == readWhole {
		body, err := io.ReadAll(io.LimitReader(s.cur.r, s.maxObject+1))
		if err != nil {
			return nil, err
		}
		if int64(len(body)) > s.maxObject {
			return nil, fmt.Errorf("the object is larger than max_object_size (%d bytes)", s.maxObject)
		}
		msgs = append(msgs, s.message(pos.Key, 0, body))
		pos.Offset, pos.Done = int64(len(body)), true
		s.closeReader()
		return s.batch(connector.SchemaRaw, msgs, pos), nil
	}
	for len(msgs) < s.batchSize {
		line, err := s.cur.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		start := pos.Offset
		pos.Offset += int64(len(line))
		if text := bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(text)) > 0 {
			msgs = append(msgs, s.message(pos.Key, start, bytes.Clone(text)))
		}
		if errors.Is(err, io.EOF) {
			pos.Done = true
			break
		}
	}
	if !pos.Done {
		if _, err := s.cur.r.Peek(1); errors.Is(err, io.EOF) {
			pos.Done = true
		}
	}
	if pos.Done {
		s.closeReader()
	}
	schema := connector.SchemaJSON
	if s.format == readLines {
		schema = connector.SchemaText
	}
	return s.batch(schema, msgs, pos), nil
}

func (s *Source) batch(schema connector.Schema, msgs []connector.Message, pos position) *connector.Batch {
	s.pos = pos
	state, _ := json.Marshal(pos)
	return &connector.Batch{Schema: schema, Messages: msgs, State: state}
}

// message is one record, with an id derived from the bucket, key and
// byte offset, so a record read again after a crash has the same id.
func (s *Source) message(key string, offset int64, payload []byte) connector.Message {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", s.conn.bucket, key, offset)))
	var id [16]byte
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80 // UUID version 8 (custom), RFC 9562 variant
	id[8] = id[8]&0x3f | 0x80
	m := connector.Message{ID: id, Payload: payload}
	if len(key) <= 255 {
		m.SetHeader("s3_key", header.StringValue(key))
	}
	m.SetHeader("s3_offset", header.Uint64Value(uint64(offset)))
	return m
}

// Ack deletes or moves an object once its last batch is in Iggy.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	var pos position
	if s.afterRead == "none" || json.Unmarshal(b.State, &pos) != nil || !pos.Done {
		return nil
	}
	return s.finish(ctx, pos.Key)
}

// Nack keeps everything: the runtime sends the same batch again.
func (s *Source) Nack(context.Context, *connector.Batch, error) {}

// finish applies after_read to a read object (gone already is fine).
func (s *Source) finish(ctx context.Context, key string) error {
	switch s.afterRead {
	case "move":
		_, err := s.conn.client.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.conn.bucket, Object: s.movePrefix + key},
			minio.CopySrcOptions{Bucket: s.conn.bucket, Object: key})
		if err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchKey" {
				return nil
			}
			return fmt.Errorf("move %s to %s%s at %s: %s", key, s.movePrefix, key, s.conn.where, describe(err))
		}
	case "delete":
	default:
		return nil
	}
	if err := s.conn.client.RemoveObject(ctx, s.conn.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s at %s: %s", key, s.conn.where, describe(err))
	}
	return nil
}

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
)
