package mongodb

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "mongodb",
		Summary:   "reads a MongoDB collection in the order of a tracking field, resuming after the last document delivered",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// Source is the mongodb source.
type Source struct {
	uri, safeURI         string
	database, collection string
	field                string
	batchSize            int
	interval             time.Duration
	payloadField         []string
	schema               connector.Schema
	deleteAfter          bool
	processedField       string
	metadata             bool
	poolSize             int
	log                  *slog.Logger

	client *mongo.Client
	coll   *mongo.Collection
	last   *position // the last document read (not necessarily delivered); Poll's alone

	mu      sync.Mutex
	pending map[*connector.Batch]bson.A // the _ids of each batch not acknowledged yet
}

// position is where reading resumes: after this tracking value and _id.
type position struct {
	Value, ID bson.RawValue
}

// NewSource builds a mongodb source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		uri: set.String("connection_uri"), database: set.String("database"), collection: set.String("collection"),
		field: set.String("tracking_field"), batchSize: set.Int("batch_size"), interval: set.Duration("poll_interval"),
		schema: connector.Schema(set.String("schema")), deleteAfter: set.Bool("delete_after_read"),
		processedField: set.String("processed_field"), metadata: set.Bool("include_metadata"),
		poolSize: set.Int("max_pool_size"), log: log, pending: map[*connector.Batch]bson.A{},
	}
	if p := set.String("payload_field"); p != "" {
		s.payloadField = strings.Split(p, ".")
	}
	s.safeURI = redactURI(s.uri)
	return s, nil
}

// Open connects and takes up the position of the last saved state.
func (s *Source) Open(ctx context.Context, state []byte) error {
	if state != nil {
		p, err := decodeState(state)
		if err != nil {
			return fmt.Errorf("mongodb source: saved state %q: %w", state, err)
		}
		s.last = p
	}
	client, err := connect(ctx, s.uri, s.poolSize)
	if err != nil {
		return err
	}
	s.client, s.coll = client, client.Database(s.database).Collection(s.collection)
	return nil
}

// Close disconnects; it is idempotent.
func (s *Source) Close(context.Context) error {
	if s.client != nil {
		disconnect(s.client)
		s.client, s.coll = nil, nil
	}
	return nil
}

// Poll returns the next documents after the position, waiting
// poll_interval between queries that find none.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		docs, err := s.query(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("mongodb source: find in %s.%s at %s: %w", s.database, s.collection, s.safeURI, scrubbed(err, s.uri))
		}
		if len(docs) > 0 {
			return s.batch(docs)
		}
		if backoff.Sleep(ctx, s.interval) != nil {
			return nil, ctx.Err()
		}
	}
}

// query finds up to batch_size documents after the position, in
// (tracking field, _id) order. Every value in the filter is BSON built
// here; nothing from the configuration is parsed as a query.
func (s *Source) query(ctx context.Context) ([]bson.Raw, error) {
	var and bson.A
	sort := bson.D{{Key: "_id", Value: 1}}
	if s.field != "_id" {
		sort = bson.D{{Key: s.field, Value: 1}, {Key: "_id", Value: 1}}
	}
	switch {
	case s.field == "_id" && s.last != nil:
		and = append(and, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: s.last.ID}}}})
	case s.last != nil:
		and = append(and, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: s.field, Value: bson.D{{Key: "$gt", Value: s.last.Value}}}},
			bson.D{{Key: s.field, Value: s.last.Value}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: s.last.ID}}}},
		}}})
	case s.field != "_id":
		// Null and missing sort first, and no value is $gt them in
		// another type: they would stop the reading.
		and = append(and, bson.D{{Key: s.field, Value: bson.D{{Key: "$exists", Value: true}, {Key: "$ne", Value: nil}}}})
	}
	if s.processedField != "" {
		and = append(and, bson.D{{Key: s.processedField, Value: bson.D{{Key: "$ne", Value: true}}}})
	}
	filter := bson.D{}
	if len(and) == 1 {
		filter = and[0].(bson.D)
	} else if len(and) > 1 {
		filter = bson.D{{Key: "$and", Value: and}}
	}
	cur, err := s.coll.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(s.batchSize)))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var docs []bson.Raw
	for cur.Next(ctx) {
		docs = append(docs, append(bson.Raw(nil), cur.Current...))
	}
	return docs, cur.Err()
}

// batch turns documents into messages and moves the position past them.
func (s *Source) batch(docs []bson.Raw) (*connector.Batch, error) {
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, 0, len(docs))}
	ids := make(bson.A, 0, len(docs))
	var last position
	for _, doc := range docs {
		id, err := doc.LookupErr("_id")
		if err != nil {
			return nil, fmt.Errorf("mongodb source: a document without _id in %s.%s", s.database, s.collection)
		}
		last = position{ID: id, Value: id}
		if s.field != "_id" {
			last.Value = lookup(doc, strings.Split(s.field, "."))
		}
		m := connector.Message{ID: s.messageID(id), Payload: s.payload(doc)}
		if s.metadata {
			m.Headers = append(m.Headers, connector.StringHeader("mongodb_database", s.database),
				connector.StringHeader("mongodb_collection", s.collection))
			if text := jsonText(id); len(text) <= 255 {
				m.Headers = append(m.Headers, connector.StringHeader("mongodb_id", text))
			}
		}
		b.Messages = append(b.Messages, m)
		ids = append(ids, id)
	}
	state, err := encodeState(&last)
	if err != nil {
		return nil, err
	}
	b.State = state
	s.last = &last
	s.mu.Lock()
	s.pending[b] = ids
	s.mu.Unlock()
	return b, nil
}

// Ack deletes or marks the batch's documents when asked to: they are in
// Iggy and the position after them is saved.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	s.mu.Lock()
	ids := s.pending[b]
	delete(s.pending, b)
	s.mu.Unlock()
	if len(ids) == 0 || s.coll == nil {
		return nil
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	switch {
	case s.deleteAfter:
		if _, err := s.coll.DeleteMany(ctx, filter); err != nil {
			return fmt.Errorf("mongodb source: delete %d delivered documents: %w", len(ids), scrubbed(err, s.uri))
		}
	case s.processedField != "":
		update := bson.D{{Key: "$set", Value: bson.D{{Key: s.processedField, Value: true}}}}
		if _, err := s.coll.UpdateMany(ctx, filter, update); err != nil {
			return fmt.Errorf("mongodb source: mark %d delivered documents: %w", len(ids), scrubbed(err, s.uri))
		}
	}
	return nil
}

// Nack keeps the batch pending: the runtime sends it again and then
// acknowledges it.
func (s *Source) Nack(context.Context, *connector.Batch, error) {}

// messageID is a stable id of a document: its database, collection and
// _id hashed, so a document read again carries the same id.
func (s *Source) messageID(id bson.RawValue) [16]byte {
	h := sha256.New()
	h.Write([]byte(s.database))
	h.Write([]byte{0})
	h.Write([]byte(s.collection))
	h.Write([]byte{0, byte(id.Type)})
	h.Write(id.Value)
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// payload is what the message carries (see the spec's schema).
func (s *Source) payload(doc bson.Raw) []byte {
	if s.payloadField == nil {
		if b, err := bson.MarshalExtJSON(doc, false, false); err == nil {
			return b
		}
		return []byte("null")
	}
	v := lookup(doc, s.payloadField)
	switch {
	case s.schema == connector.SchemaText && v.Type == bson.TypeString:
		return []byte(v.StringValue())
	case s.schema == connector.SchemaRaw && v.Type == bson.TypeString:
		return []byte(v.StringValue())
	case s.schema == connector.SchemaRaw && v.Type == bson.TypeBinary:
		_, data := v.Binary()
		return append([]byte(nil), data...)
	}
	return []byte(jsonText(v))
}

// lookup is the value at path, or null when it is missing.
func lookup(doc bson.Raw, path []string) bson.RawValue {
	v, err := doc.LookupErr(path...)
	if err != nil {
		return bson.RawValue{Type: bson.TypeNull}
	}
	return v
}

// jsonText renders one value as relaxed Extended JSON.
func jsonText(v bson.RawValue) string {
	if v.Type == bson.TypeEmbeddedDocument {
		if b, err := bson.MarshalExtJSON(v.Document(), false, false); err == nil {
			return string(b)
		}
	}
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return "null"
	}
	var wrap struct{ V json.RawMessage }
	if json.Unmarshal(b, &wrap) != nil {
		return "null"
	}
	return string(wrap.V)
}

// encodeState is the position as canonical Extended JSON, which keeps
// every BSON type exactly.
func encodeState(p *position) ([]byte, error) {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: p.Value}, {Key: "id", Value: p.ID}}, true, false)
	if err != nil {
		return nil, fmt.Errorf("mongodb source: encode the position: %w", err)
	}
	return b, nil
}

func decodeState(state []byte) (*position, error) {
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(state, true, &doc); err != nil {
		return nil, fmt.Errorf("not a position: %w", err)
	}
	v, err1 := doc.LookupErr("v")
	id, err2 := doc.LookupErr("id")
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("not a position: %w", err)
	}
	return &position{Value: v, ID: id}, nil
}

var _ connector.Acker = (*Source)(nil)
