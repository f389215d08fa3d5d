package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "mongodb",
		Aliases: []string{"libiggy_connector_mongodb_sink"},
		Summary: "inserts messages into a MongoDB collection keyed by message id, so replays add no duplicates",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// Sink is the mongodb sink.
type Sink struct {
	uri, safeURI           string
	database, collection   string
	poolSize               int
	autoCreate             bool
	batchSize              int
	metadata, checksum     bool
	origin, verbose        bool
	format                 string
	maxRetries             int
	retryDelay             time.Duration
	maxDoc                 int64
	idFromKey              bool // id_from = "key" (sink_key.go)
	log                    *slog.Logger
	mu                     sync.Mutex // guards client and coll against Close
	client                 *mongo.Client
	coll                   *mongo.Collection
	limit                  int64 // the smaller of maxDoc and the server's maxBsonObjectSize
	processed, refusedDocs int64
}

// NewSink builds a mongodb sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		uri: set.String("connection_uri"), database: set.String("database"), collection: set.String("collection"),
		poolSize: set.Int("max_pool_size"), autoCreate: set.Bool("auto_create_collection"), batchSize: set.Int("batch_size"),
		metadata: set.Bool("include_metadata"), checksum: set.Bool("include_checksum"),
		origin: set.Bool("include_origin_timestamp"), format: set.String("payload_format"),
		verbose: set.Bool("verbose_logging") || cfg.Verbose, maxRetries: set.Int("max_retries"),
		retryDelay: set.Duration("retry_delay"), maxDoc: set.Size("max_document_size"), log: log,
		idFromKey: set.String("id_from") == "key",
	}
	s.safeURI = redactURI(s.uri)
	return s, nil
}

// Open connects, checks the server answers, reads its document size
// limit and, with auto_create_collection, creates the collection. A
// server that is down is Unavailable: the runtime retries with backoff.
func (s *Sink) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	client, err := connect(ctx, s.uri, s.poolSize)
	if err != nil {
		return err
	}
	db := client.Database(s.database)
	s.limit = s.maxDoc
	if n, err := maxBSONSize(ctx, db); err == nil && n > 0 && n < s.limit {
		s.limit = n
	}
	if s.autoCreate {
		if err := ensureCollection(ctx, db, s.collection); err != nil {
			disconnect(client)
			return fmt.Errorf("mongodb %s: %w", s.safeURI, s.scrub(err))
		}
	}
	s.client, s.coll = client, db.Collection(s.collection)
	s.log.Info("connected", "uri", s.safeURI, "database", s.database, "collection", s.collection)
	return nil
}

// connect makes a client and pings the server with it.
func connect(ctx context.Context, uri string, poolSize int) (*mongo.Client, error) {
	// Defaults first: what the URI sets (serverSelectionTimeoutMS ...) wins.
	opts := options.Client().SetServerSelectionTimeout(15 * time.Second).SetConnectTimeout(10 * time.Second).ApplyURI(uri)
	if poolSize > 0 {
		opts.SetMaxPoolSize(uint64(poolSize))
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongodb %s: %w", redactURI(uri), scrubbed(err, uri))
	}
	if err := client.Ping(ctx, nil); err != nil {
		disconnect(client)
		return nil, connector.Unavailable(fmt.Errorf("mongodb %s: ping: %w", redactURI(uri), scrubbed(err, uri)))
	}
	return client, nil
}

func disconnect(c *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Disconnect(ctx)
}

// maxBSONSize is the server's maxBsonObjectSize (hello).
func maxBSONSize(ctx context.Context, db *mongo.Database) (int64, error) {
	var hello struct {
		MaxBsonObjectSize int64 `bson:"maxBsonObjectSize"`
	}
	err := db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
	return hello.MaxBsonObjectSize, err
}

// ensureCollection creates name unless it exists (a concurrent create is
// no failure).
func ensureCollection(ctx context.Context, db *mongo.Database, name string) error {
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: name}})
	if err != nil {
		return fmt.Errorf("list collections: %w", err)
	}
	if len(names) > 0 {
		return nil
	}
	if err := db.CreateCollection(ctx, name); err != nil {
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Code == 48 { // NamespaceExists
			return nil
		}
		return fmt.Errorf("create collection %q: %w", name, err)
	}
	return nil
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): documents are keyed by the message id, so their order does not matter.
func (s *Sink) ConsumesOutOfOrder() {}

// Close disconnects; it is idempotent.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		disconnect(s.client)
		s.log.Info("closed", "collection", s.collection, "inserted", s.processed, "refused", s.refusedDocs)
	}
	s.client, s.coll = nil, nil
	return nil
}

// Consume inserts the batch in insertMany calls of batch_size documents,
// unordered, and returns when MongoDB acknowledged each (see the package
// doc for what fails how).
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coll == nil {
		return connector.Unavailable(errors.New("mongodb: the sink is not open"))
	}
	if s.idFromKey {
		return s.consumeByKey(ctx, b) // sink_key.go
	}
	failed := connector.MessageErrors{}
	docs := make([]bson.Raw, len(b.Messages))
	ids := make([]string, len(b.Messages))
	todo := make([]int, 0, len(b.Messages))
	for i := range b.Messages {
		ids[i] = documentID(b, &b.Messages[i])
		raw, err := s.document(b, &b.Messages[i], ids[i])
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		docs[i] = raw
		todo = append(todo, i)
	}
	for len(todo) > 0 {
		chunk := todo[:min(s.batchSize, len(todo))]
		todo = todo[len(chunk):]
		if err := s.insert(ctx, docs, ids, chunk, failed); err != nil {
			return err
		}
	}
	s.processed += int64(len(b.Messages) - len(failed))
	s.refusedDocs += int64(len(failed))
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "inserted batch", "collection", s.collection, "documents", len(b.Messages)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// insert writes docs[chunk...] with retries. Documents the server
// refuses are recorded in failed; a duplicate _id is a document an
// earlier delivery wrote, which counts as written.
func (s *Sink) insert(ctx context.Context, docs []bson.Raw, ids []string, chunk []int, failed connector.MessageErrors) error {
	pending := chunk
	for attempt := 1; ; attempt++ {
		batch := make([]any, len(pending))
		for k, i := range pending {
			batch[k] = docs[i]
		}
		_, err := s.coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(false))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var bwe mongo.BulkWriteException
		if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
			rest, cerr := s.classify(ctx, bwe, pending, ids, failed)
			if len(rest) == 0 {
				return nil
			}
			pending = rest
			if cerr != nil {
				err = cerr
			}
		} else if !transient(err) {
			return fmt.Errorf("mongodb: insert into %s.%s: %w", s.database, s.collection, s.scrub(err))
		}
		if attempt >= s.maxRetries {
			return connector.Unavailable(fmt.Errorf("mongodb: insert into %s.%s at %s: %d documents unwritten after %d attempts: %w",
				s.database, s.collection, s.safeURI, len(pending), attempt, s.scrub(err)))
		}
		s.log.Warn("insert failed; retrying", "collection", s.collection, "documents", len(pending), "attempt", attempt, "error", s.scrub(err))
		if backoff.Sleep(ctx, s.retryDelay*time.Duration(attempt)) != nil {
			return ctx.Err()
		}
	}
}

// classify sorts the write errors of an unordered insert of pending:
// refused documents go to failed, and those to try again are returned
// (the documents the errors do not name were written).
func (s *Sink) classify(ctx context.Context, bwe mongo.BulkWriteException, pending []int, ids []string,
	failed connector.MessageErrors) ([]int, error) {
	var rest, dups []int
	reasons := map[int]string{}
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(pending) {
			continue
		}
		i := pending[we.Index]
		switch {
		case we.Code == 11000 || we.Code == 11001:
			dups = append(dups, i)
			reasons[i] = we.Message
		case transientCodes[we.Code]:
			rest = append(rest, i)
		default:
			failed[i] = connector.Permanent(fmt.Errorf("MongoDB refused the document: %s (code %d)", we.Message, we.Code))
		}
	}
	if len(dups) == 0 {
		return rest, nil
	}
	// A duplicate key is either this _id, written by an earlier delivery
	// of the message (done), or another unique index (refused). The
	// message does not always say which index, so look.
	want := make(bson.A, len(dups))
	for k, i := range dups {
		want[k] = ids[i]
	}
	have, err := s.existing(ctx, want)
	if err != nil {
		return append(rest, dups...), err
	}
	for _, i := range dups {
		if !have[ids[i]] {
			failed[i] = connector.Permanent(fmt.Errorf("MongoDB refused the document: %s (code 11000, a unique index other than _id)", reasons[i]))
		}
	}
	return rest, nil
}

// existing returns which of ids the collection holds.
func (s *Sink) existing(ctx context.Context, ids bson.A) (map[string]bool, error) {
	cur, err := s.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("look up duplicate ids: %w", err)
	}
	defer cur.Close(ctx)
	have := map[string]bool{}
	for cur.Next(ctx) {
		if id, ok := cur.Current.Lookup("_id").StringValueOK(); ok {
			have[id] = true
		}
	}
	return have, cur.Err()
}

// document is the BSON document for m, as upstream builds it.
func (s *Sink) document(b *connector.SinkBatch, m *connector.Message, id any) (bson.Raw, error) {
	doc := bson.D{{Key: "_id", Value: id}}
	if s.metadata {
		if m.Offset <= math.MaxInt64 {
			doc = append(doc, bson.E{Key: "iggy_offset", Value: int64(m.Offset)})
		} else {
			doc = append(doc, bson.E{Key: "iggy_offset_str", Value: fmt.Sprint(m.Offset)})
		}
		var partition any = int64(b.Partition)
		if b.Partition <= math.MaxInt32 {
			partition = int32(b.Partition)
		}
		doc = append(doc, bson.E{Key: "iggy_timestamp", Value: dateTime(m.Timestamp)},
			bson.E{Key: "iggy_stream", Value: b.Stream}, bson.E{Key: "iggy_topic", Value: b.Topic},
			bson.E{Key: "iggy_partition_id", Value: partition})
	}
	if s.checksum {
		var sum any = fmt.Sprint(m.Checksum)
		if m.Checksum <= math.MaxInt64 {
			sum = int64(m.Checksum)
		}
		doc = append(doc, bson.E{Key: "iggy_checksum", Value: sum})
	}
	if s.origin {
		doc = append(doc, bson.E{Key: "iggy_origin_timestamp", Value: dateTime(m.OriginTimestamp)})
	}
	var payload any
	switch s.format {
	case "json":
		v, err := jsonToBSON(m.Payload)
		if err != nil {
			return nil, err
		}
		payload = v
	case "string":
		if !utf8.Valid(m.Payload) {
			return nil, errors.New("the payload is not UTF-8 text (payload_format = \"string\")")
		}
		payload = string(m.Payload)
	default:
		payload = bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: m.Payload}
	}
	doc = append(doc, bson.E{Key: "payload", Value: payload})
	raw, err := bson.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("the document cannot be BSON: %w", err)
	}
	if int64(len(raw)) > s.limit {
		return nil, fmt.Errorf("the document is %d bytes, above the limit of %d (max_document_size or the server's maxBsonObjectSize)", len(raw), s.limit)
	}
	return raw, nil
}

// documentID is upstream's _id: "stream:topic:partition:id" with the
// Iggy message id as a decimal u128 (its bytes are little-endian).
func documentID(b *connector.SinkBatch, m *connector.Message) string {
	var be [16]byte
	for i := range m.ID {
		be[15-i] = m.ID[i]
	}
	return fmt.Sprintf("%s:%s:%d:%s", b.Stream, b.Topic, b.Partition, new(big.Int).SetBytes(be[:]).String())
}

func dateTime(t time.Time) bson.DateTime {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return bson.DateTime(0)
	}
	return bson.NewDateTimeFromTime(t)
}

// transientCodes are server error codes that say the server is busy,
// moving or going away, not that a document is bad.
var transientCodes = map[int]bool{
	6: true, 7: true, 89: true, 91: true, 189: true, 262: true, 9001: true, 10107: true,
	11600: true, 11602: true, 13435: true, 13436: true, 64: true, 112: true, 133: true,
}

// transient reports whether a whole-call error is the server being away.
func transient(err error) bool {
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.Is(err, mongo.ErrClientDisconnected) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		if se.HasErrorLabel("RetryableWriteError") {
			return true
		}
		for code := range transientCodes {
			if se.HasErrorCode(code) {
				return true
			}
		}
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "server selection") || strings.Contains(msg, "connection") || strings.Contains(msg, "timeout")
}

// scrub is err with the URI's credentials taken out of its text.
func (s *Sink) scrub(err error) error { return scrubbed(err, s.uri) }

// scrubbed is err with uri's credentials taken out of its text; it
// unwraps to err, so errors.Is and As still see the driver's error.
func scrubbed(err error, uri string) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: redactIn(err.Error(), uri), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
