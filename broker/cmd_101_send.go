package broker

// send_messages (101, operation 160; fact sheet §6.1-6.3) and
// flush_unsaved_buffer (102).
//
// The stream, topic and partition resolve first (status 20 if not):
// balanced partitioning is a per-topic round robin, partition_id must
// exist, messages_key is XXH32(key) % partitions. The batch is then
// checked with the connection's wire.BatchChecker (layout, reserved bytes,
// every frame checksum, the batch checksum, and every offset_delta equal to
// its frame's index). Under the partition's
// append lock it is stamped with the partition id, base_offset = the log's
// next offset and base_timestamp = now in µs (never below the partition's
// previous one), its checksum recomputed, and appended. The reply is raw:
// [1u32][stream u32][topic u32][partition u32][base_offset u64].
//
// Deviation: upstream drops a batch that fails its checks without a reply
// (the client waits out its timeout); this broker answers the check's
// status instead: 3 for a malformed body (metadata length or message
// count not matching the batch, frames not tiling it, an offset_delta
// that is not the frame's index: upstream stores any deltas, and polls
// then report the messages at wrong offsets), 4009 for an empty
// batch, 4027 for a frame checksum, 4039 for the batch checksum, 4101 for
// non-zero reserved bytes.
//
// flush_unsaved_buffer answers status 5 as upstream does (nothing to flush).

import (
	"errors"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
)

func handleSend(b *Broker, r *request) reply {
	var req wire.SendMessages
	if err := wire.DecodeRequest(r.body, &req); err != nil {
		b.log.Debug("refusing a malformed send", "conn", r.c.id, "err", err)
		return status(wire.ErrInvalidCommand.Code)
	}
	b.mu.RLock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	var p *partition
	var sid, tid uint32
	if t != nil {
		sid, tid = s.id, t.id
		p = t.partition(pickPartition(t, req.Partitioning))
	}
	b.mu.RUnlock()
	if p == nil {
		return status(wire.ErrResourceNotFound.Code)
	}
	if _, err := r.c.checker.ValidateSend(req.Batch); err != nil {
		b.log.Debug("refusing a batch that fails its checks", "conn", r.c.id, "err", err)
		return status(codeOf(err))
	}
	p.mu.Lock()
	base := p.log.NextOffset()
	batch, count, ids, err := p.dedupe(r, req.Batch, req.Count)
	if err == nil && batch != nil {
		ts := max(nowMicros(), p.lastTS)
		r.c.checker.Stamp(batch, uint64(p.id), base, ts)
		if err = p.log.Append(batch); err == nil {
			p.lastTS = ts
			p.remember(ids)
		}
	}
	p.mu.Unlock()
	req.Count = count
	if err != nil {
		if errors.Is(err, storage.ErrClosed) { // deleted meanwhile
			return status(wire.ErrResourceNotFound.Code)
		}
		return b.appendFailed(err)
	}
	p.topic.traffic.in(req.Count, len(req.Batch))
	p.topic.appended.fire()
	return rawOf(&wire.SendReply{{Stream: sid, Topic: tid, Partition: p.id, BaseOffset: base}})
}

// dedupe is the batch to append (nil: none, every message was sent
// before) and its message count, when the partition deduplicates by id
// (dedup.go); the batch itself otherwise. A batch it rebuilds is checked
// again, so Stamp has its sums. Caller holds p.mu.
func (p *partition) dedupe(r *request, batch []byte, count uint32) ([]byte, uint32, [][16]byte, error) {
	if p.ids == nil {
		return batch, count, nil, nil
	}
	kept, ids, err := p.ids.filter(batch, time.Now())
	if err != nil || kept == nil {
		return nil, 0, nil, err
	}
	if len(kept) != len(batch) {
		h, err := r.c.checker.ValidateSend(kept)
		if err != nil {
			return nil, 0, nil, err
		}
		count = h.Count
	}
	return kept, count, ids, nil
}

// remember adds the ids of an appended batch to the partition's recent
// ids. Caller holds p.mu.
func (p *partition) remember(ids [][16]byte) {
	if p.ids == nil {
		return
	}
	now := time.Now()
	for _, id := range ids {
		p.ids.add(id, now)
	}
}

// pickPartition resolves a partitioning to a partition id; an id that
// does not exist (including any id of a topic without partitions) makes
// the caller answer status 20. Caller holds b.mu.
func pickPartition(t *topic, p wire.Partitioning) uint32 {
	n := uint64(len(t.parts))
	switch p.Kind {
	case wire.PartitionByID:
		return p.PartitionID
	case wire.PartitionByMessageKey:
		return wire.PartitionForKey(p.Key, uint32(n))
	}
	if n == 0 {
		return 0
	}
	return uint32((t.rr.Add(1) - 1) % n)
}

func handleFlushUnsavedBuffer(b *Broker, r *request) reply {
	return status(wire.ErrFeatureUnavailable.Code)
}
