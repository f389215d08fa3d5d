package broker

// Partitions (codes 402, 403) and segments (503).
//
// create_partitions (402, op 136) appends count partitions after the
// highest id; delete_partitions (403, op 137) removes the count highest.
// count 0 or above 1000 is status 2015; a missing stream or topic the
// committed 1009/2010; deleting more partitions than exist the committed
// 2019. Both reset the assignment of every consumer group of the topic.
// delete_segments (503, op 138) drops the partition's oldest segments (the
// active one too if count reaches it; offsets are never reused) and
// replies result-framed with operation 68 (TruncatePartition), or the
// committed 1009/2010/3007. A failure after some segments were dropped is
// committed as a success (and logged), so replaying the request id does
// not drop more; a failure that dropped nothing is status 1.

import "github.com/ferryhq/ferry/iggy/wire"

func handleCreatePartitions(b *Broker, r *request) reply {
	var req wire.PartitionsChange
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if req.Count == 0 || req.Count > maxPartitionsPerRequest {
		return status(wire.ErrTooManyPartitions.Code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	switch {
	case s == nil:
		return rejected(wire.ErrStreamIDNotFound.Code)
	case t == nil:
		return rejected(wire.ErrTopicIDNotFound.Code)
	case len(t.parts)+int(req.Count) > maxPartitions:
		return rejected(wire.ErrPartitionIDSpaceExhausted.Code)
	}
	from := len(t.parts)
	if err := b.addPartitions(t, req.Count); err != nil {
		return b.writeFailed("create partitions", err)
	}
	if err := b.saveMeta(); err != nil {
		for _, p := range t.parts[from:] {
			p.destroy()
		}
		t.parts = t.parts[:from]
		return b.writeFailed("create partitions", err)
	}
	t.resetGroups()
	return okResult(nil)
}

func handleDeletePartitions(b *Broker, r *request) reply {
	var req wire.PartitionsChange
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if req.Count == 0 || req.Count > maxPartitionsPerRequest {
		return status(wire.ErrTooManyPartitions.Code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	switch {
	case s == nil:
		return rejected(wire.ErrStreamIDNotFound.Code)
	case t == nil:
		return rejected(wire.ErrTopicIDNotFound.Code)
	case int(req.Count) > len(t.parts):
		return rejected(wire.ErrInvalidPartitionsCount.Code)
	}
	keep := len(t.parts) - int(req.Count)
	removed := t.parts[keep:]
	t.parts = t.parts[:keep:keep]
	if err := b.saveMeta(); err != nil {
		t.parts = append(t.parts, removed...)
		return b.writeFailed("delete partitions", err)
	}
	t.resetGroups()
	for _, p := range removed {
		if err := p.destroy(); err != nil {
			b.log.Warn("deleting partition files failed", "topic", t.name, "partition", p.id, "err", err)
		}
	}
	return okResult(nil)
}

func handleDeleteSegments(b *Broker, r *request) reply {
	var req wire.DeleteSegments
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	var p *partition
	if t != nil {
		p = t.partition(req.Partition)
	}
	b.mu.RUnlock()
	rep := okResult(nil)
	switch {
	case s == nil:
		rep = rejected(wire.ErrStreamIDNotFound.Code)
	case t == nil:
		rep = rejected(wire.ErrTopicIDNotFound.Code)
	case p == nil:
		rep = rejected(wire.ErrPartitionNotFound.Code)
	default:
		p.mu.Lock()
		first := p.log.FirstOffset()
		n, err := p.log.DropOldest(int(min(req.Count, 1<<30)))
		dropped := p.log.FirstOffset() != first
		p.mu.Unlock()
		switch {
		case err != nil && (n > 0 || dropped):
			// Part of the request is done and cannot be undone: commit it,
			// so a retry with the same request id replays this reply
			// instead of dropping more segments.
			b.log.Error("delete segments failed part way; committed what was dropped",
				"topic", t.name, "partition", p.id, "asked", req.Count, "dropped", n, "err", err)
		case err != nil:
			rep = b.writeFailed("delete segments", err)
		}
	}
	rep.op = wire.OpTruncatePartition
	return rep
}
