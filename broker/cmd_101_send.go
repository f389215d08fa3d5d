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
	ts := max(nowMicros(), p.lastTS)
	r.c.checker.Stamp(req.Batch, uint64(p.id), base, ts)
	err := p.log.Append(req.Batch)
	if err == nil {
		p.lastTS = ts
	}
	p.mu.Unlock()
	if err != nil {
		if errors.Is(err, storage.ErrClosed) { // deleted meanwhile
			return status(wire.ErrResourceNotFound.Code)
		}
		return b.appendFailed(err)
	}
	p.topic.traffic.in(req.Count, len(req.Batch))
	return rawOf(&wire.SendReply{{Stream: sid, Topic: tid, Partition: p.id, BaseOffset: base}})
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
