package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/backoff"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Documents by key (Ferry: id_from = "key"). The _id is the message key
// of Ferry's convention (the iggy.KeyHeader header, docs/keys.md): a
// string key is a string _id, a binary key a BSON binary (subtype 0).
// A message replaces its key's document (an upsert) only when its
// iggy_offset is above the stored one, so a replay of an older batch
// never overwrites a newer value; a deletion marker
// (iggy.DeletedHeader = true) deletes the document under the same
// guard. Within a batch only the message of highest offset per key is
// written. Offsets order one partition's messages, so a key's messages
// must be in one partition (as sending by key does); a replay starting
// before a deletion marker may bring the document back until it reaches
// the marker again. A message without a key is a permanent failure.

// docKey is m's key as an _id value, and its text for maps.
func docKey(m *connector.Message) (any, string, error) {
	v, ok := m.Header(iggy.KeyHeader)
	switch {
	case !ok:
		return nil, "", fmt.Errorf("id_from = \"key\": the message has no %q header (see docs/keys.md)", iggy.KeyHeader)
	case v.Kind == header.KindString:
		return string(v.Data), "s" + string(v.Data), nil
	case v.Kind == header.KindRaw:
		return bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: v.Data}, "b" + string(v.Data), nil
	}
	return nil, "", fmt.Errorf("id_from = \"key\": the %q header is a %s, not a string or raw bytes", iggy.KeyHeader, v.Kind)
}

func isDeletion(m *connector.Message) bool {
	v, ok := m.Header(iggy.DeletedHeader)
	return ok && v.Bool()
}

// olderThan matches the document of id when its offset is below off (or
// it has none).
func olderThan(id any, off int64) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "iggy_offset", Value: bson.D{{Key: "$lt", Value: off}}}},
		bson.D{{Key: "iggy_offset", Value: bson.D{{Key: "$exists", Value: false}}}},
	}}}
}

// consumeByKey writes the latest message of each key of the batch: a
// guarded replace-upsert, or a guarded delete for a deletion marker, in
// one unordered bulk write per batch_size keys.
func (s *Sink) consumeByKey(ctx context.Context, b *connector.SinkBatch) error {
	failed := connector.MessageErrors{}
	type pick struct {
		i     int
		model mongo.WriteModel
	}
	latest := map[string]pick{}
	var order []string
	for i := range b.Messages {
		m := &b.Messages[i]
		id, k, err := docKey(m)
		if err == nil && m.Offset > math.MaxInt64 {
			err = fmt.Errorf("id_from = \"key\": offset %d is beyond what iggy_offset (int64) holds", m.Offset)
		}
		var model mongo.WriteModel
		if err == nil {
			if isDeletion(m) {
				model = mongo.NewDeleteOneModel().SetFilter(olderThan(id, int64(m.Offset)))
			} else {
				var doc bson.Raw
				if doc, err = s.document(b, m, id); err == nil {
					model = mongo.NewReplaceOneModel().SetFilter(olderThan(id, int64(m.Offset))).SetReplacement(doc).SetUpsert(true)
				}
			}
		}
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		if p, ok := latest[k]; ok && b.Messages[p.i].Offset > m.Offset {
			continue
		} else if !ok {
			order = append(order, k)
		}
		latest[k] = pick{i, model}
	}
	picks := make([]pick, len(order))
	for j, k := range order {
		picks[j] = latest[k]
	}
	for start := 0; start < len(picks); start += s.batchSize {
		chunk := picks[start:min(start+s.batchSize, len(picks))]
		models, index := make([]mongo.WriteModel, len(chunk)), make([]int, len(chunk))
		for j, p := range chunk {
			models[j], index[j] = p.model, p.i
		}
		if err := s.bulk(ctx, models, index, failed); err != nil {
			return err
		}
	}
	written := len(b.Messages) - len(failed)
	s.processed += int64(written)
	s.refusedDocs += int64(len(failed))
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "wrote batch by key", "collection", s.collection, "keys", len(picks), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// bulk runs models (index: their messages) with retries. A duplicate _id
// on an upsert means the stored document is newer (the guard did not
// match, and the insert found the key): the message is superseded, which
// counts as written.
func (s *Sink) bulk(ctx context.Context, models []mongo.WriteModel, index []int, failed connector.MessageErrors) error {
	pending, at := models, index
	for attempt := 1; ; attempt++ {
		_, err := s.coll.BulkWrite(ctx, pending, options.BulkWrite().SetOrdered(false))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var bwe mongo.BulkWriteException
		if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
			var rest []mongo.WriteModel
			var restAt []int
			for _, we := range bwe.WriteErrors {
				if we.Index < 0 || we.Index >= len(pending) {
					continue
				}
				switch {
				case (we.Code == 11000 || we.Code == 11001) && !otherIndex(we.Message):
					// superseded by a newer document of the key
				case transientCodes[we.Code]:
					rest, restAt = append(rest, pending[we.Index]), append(restAt, at[we.Index])
				default:
					failed[at[we.Index]] = connector.Permanent(fmt.Errorf("MongoDB refused the write: %s (code %d)", we.Message, we.Code))
				}
			}
			if len(rest) == 0 {
				return nil
			}
			pending, at = rest, restAt
		} else if !transient(err) {
			return fmt.Errorf("mongodb: bulk write to %s.%s: %w", s.database, s.collection, s.scrub(err))
		}
		if attempt >= s.maxRetries {
			return connector.Unavailable(fmt.Errorf("mongodb: bulk write to %s.%s at %s: %d writes undone after %d attempts: %w",
				s.database, s.collection, s.safeURI, len(pending), attempt, s.scrub(err)))
		}
		s.log.Warn("bulk write failed; retrying", "collection", s.collection, "writes", len(pending), "attempt", attempt, "error", s.scrub(err))
		if backoff.Sleep(ctx, s.retryDelay*time.Duration(attempt)) != nil {
			return ctx.Err()
		}
	}
}

// otherIndex reports whether a duplicate-key message names a unique index
// other than _id's ("... index: email_1 dup key ..."). MongoDB names the
// index; FerretDB names none, and has no other unique index to hit.
func otherIndex(msg string) bool {
	_, rest, ok := strings.Cut(msg, "index: ")
	return ok && !strings.HasPrefix(rest, "_id_")
}
