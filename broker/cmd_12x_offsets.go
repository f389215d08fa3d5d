package broker

// Consumer offsets (codes 120-122).
//
// Offsets are kept per partition, keyed by consumer: a single consumer by
// its numeric id (a named one by XXH32 of its name), a group by its
// numeric id (a group named by string is resolved), so a recreated group
// starts fresh.
//
// get_consumer_offset (120, NonReplicated, not fenced) answers
// [partition u32][current u64][stored u64], or an empty body when nothing
// is stored or the stream/topic/group is missing or the body undecodable;
// an absent partition means 0; a partition missing from the topic is
// status 3007.
//
// store_consumer_offset (121, op 161) and delete_consumer_offset (122,
// op 162) are partition-plane ops (no request-id dedup) keyed by the
// connection's bound client id. An absent partition, an unresolved
// stream/topic/partition/group, or a group partition the caller does not
// own (pending revocation allowed) is status 20. store: an empty partition
// or an offset past the current one is 4100. delete: nothing stored is
// 3021. Both reply the result-framed [0u32] whatever the ack level, after
// the offset is written to the journal (persist.go); a group store may
// complete a pending revocation.

import (
	"errors"
	"os"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

func handleGetConsumerOffset(b *Broker, r *request) reply {
	var req wire.ConsumerOffsetRef
	if err := wire.DecodeRequest(r.body, &req); err != nil {
		return raw(nil)
	}
	b.mu.RLock()
	_, t := b.lookupTopic(req.Stream, req.Topic)
	var g *group
	var p *partition
	if t != nil {
		p = t.partition(req.Partition.ID)
		if req.Consumer.Kind == wire.ConsumerGroup {
			g = t.groupBy(req.Consumer.ID)
		}
	}
	b.mu.RUnlock()
	switch {
	case t == nil, req.Consumer.Kind == wire.ConsumerGroup && g == nil:
		return raw(nil)
	case p == nil:
		return status(wire.ErrPartitionNotFound.Code)
	}
	stored, ok := p.getOffset(consumerKey(req.Consumer, g))
	if !ok {
		return raw(nil)
	}
	cur, _ := p.current()
	return rawOf(&wire.ConsumerOffsetInfo{PartitionID: p.id, CurrentOffset: cur, StoredOffset: stored})
}

// offsetTarget resolves the partition, key and group of a store/delete;
// ok false means status 20. On success with a group, g.mu is held and the
// caller must unlock it.
func (b *Broker) offsetTarget(r *request, ref wire.ConsumerOffsetRef) (p *partition, g *group, ok bool) {
	if !ref.Partition.Set {
		return nil, nil, false
	}
	b.mu.RLock()
	_, t := b.lookupTopic(ref.Stream, ref.Topic)
	if t != nil {
		p = t.partition(ref.Partition.ID)
		if ref.Consumer.Kind == wire.ConsumerGroup {
			g = t.groupBy(ref.Consumer.ID)
		}
	}
	b.mu.RUnlock()
	if p == nil || (ref.Consumer.Kind == wire.ConsumerGroup && g == nil) {
		return nil, nil, false
	}
	if g != nil {
		_, _, client, _ := r.c.sessionInfo()
		g.mu.Lock()
		if g.deleted || !g.canCommit(client, p.id) {
			g.mu.Unlock()
			return nil, nil, false
		}
	}
	return p, g, true
}

func handleStoreConsumerOffset(b *Broker, r *request) reply {
	var req wire.StoreConsumerOffset
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	p, g, ok := b.offsetTarget(r, req.ConsumerOffsetRef)
	if !ok {
		return status(wire.ErrResourceNotFound.Code)
	}
	if g != nil {
		defer g.mu.Unlock()
	}
	if cur, nonEmpty := p.current(); !nonEmpty || req.Offset > cur {
		return status(wire.ErrInvalidOffset.Code)
	}
	key := consumerKey(req.Consumer, g)
	if err := p.storeOffset(key, req.Offset, false); err != nil {
		if errors.Is(err, os.ErrClosed) { // the partition was deleted meanwhile
			return status(wire.ErrResourceNotFound.Code)
		}
		return b.writeFailed("store consumer offset", err)
	}
	b.events.offsetStored(p, g, key, req.Offset)
	if g != nil {
		g.settle(p, time.Now())
	}
	return okResult(nil)
}

func handleDeleteConsumerOffset(b *Broker, r *request) reply {
	var req wire.DeleteConsumerOffset
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	p, g, ok := b.offsetTarget(r, req.ConsumerOffsetRef)
	if !ok {
		return status(wire.ErrResourceNotFound.Code)
	}
	if g != nil {
		defer g.mu.Unlock()
	}
	found, err := p.deleteOffset(consumerKey(req.Consumer, g))
	switch {
	case errors.Is(err, os.ErrClosed):
		return status(wire.ErrResourceNotFound.Code)
	case err != nil:
		return b.writeFailed("delete consumer offset", err)
	case !found:
		return status(wire.ErrConsumerOffsetNotFound.Code)
	}
	return okResult(nil)
}
