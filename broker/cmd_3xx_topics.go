package broker

// Topics (codes 300-305).
//
// get_topic (300) answers TopicDetails (segments_count at least 1,
// current_offset the highest offset), or an empty body when the stream or
// topic is missing; get_topics (301) [count u32] + headers (count 0 for a
// missing stream). create_topic (302, op 132) checks partitions_count
// (> 1000: 2015) and the options block before anything else (structure 3,
// limits 4043, unknown key 4041, bad value 4042, max_topic_size below the
// segment size 1019, all as statuses); then a missing stream is the
// committed 1009 and a taken name 2013. The topic takes the stream's
// lowest free id; its options are re-encoded canonically and split into
// the explicit and derived blocks every topic header carries. The reply is
// TopicDetails with zeroed partition counters. update_topic (304, op 133)
// renames and updates compression_algorithm, message_expiry and
// max_topic_size. delete_topic (303) and purge_topic (305) as for streams.

import (
	"errors"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

// maxPartitionsPerRequest bounds create_topic, create_partitions and
// delete_partitions (status 2015 above it).
const maxPartitionsPerRequest = 1000

func handleGetTopic(b *Broker, r *request) reply {
	var req wire.TopicRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, t := b.lookupTopic(req.Stream, req.Topic)
	if t == nil {
		return raw(nil)
	}
	d := t.details(false)
	return rawOf(&d)
}

func handleGetTopics(b *Broker, r *request) reply {
	var req wire.StreamRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	list := wire.TopicList{}
	if s := b.streamBy(req.Stream); s != nil {
		for _, id := range sortedKeys(s.topics) {
			list = append(list, s.topics[id].header())
		}
	}
	return rawOf(&list)
}

func (s *stream) topicNamed(name string) *topic {
	for _, t := range s.topics {
		if t.name == name {
			return t
		}
	}
	return nil
}

func handleCreateTopic(b *Broker, r *request) reply {
	var req wire.CreateTopic
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if req.PartitionsCount > maxPartitionsPerRequest {
		return status(wire.ErrTooManyPartitions.Code)
	}
	entries, err := wire.ParseOptionsBlock(req.Options)
	if err != nil {
		return status(codeOf(err))
	}
	opts, err := wire.ResolveTopicOptions(wire.DefaultTopicOptions(), entries, req.PartitionsCount, false)
	if err != nil {
		return status(codeOf(err))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streamBy(req.Stream)
	if s == nil {
		return rejected(wire.ErrStreamIDNotFound.Code)
	}
	if s.topicNamed(req.Name) != nil {
		return rejected(wire.ErrTopicNameAlreadyExists.Code)
	}
	t := &topic{
		stream: s, id: lowestFree(s.topics), uid: b.nextUID, name: req.Name, createdAt: nowMicros(),
		opts: opts, groups: map[uint32]*group{},
	}
	b.nextUID++
	if err := b.addPartitions(t, req.PartitionsCount); err != nil {
		b.destroyTopic(t)
		return b.writeFailed("create topic", err)
	}
	s.topics[t.id] = t
	if err := b.saveMeta(); err != nil {
		delete(s.topics, t.id)
		b.destroyTopic(t)
		return b.writeFailed("create topic", err)
	}
	b.events.topicEvent(sysevents.TopicCreated, t, "")
	d := t.details(true)
	return okResult(&d)
}

// addPartitions opens n new partitions after t's highest. On error the
// ones opened by this call are destroyed. Caller holds b.mu for writing.
func (b *Broker) addPartitions(t *topic, n uint32) error {
	from := len(t.parts)
	now := nowMicros()
	for i := uint32(0); i < n; i++ {
		p, err := b.openPartition(t, uint32(len(t.parts)), now, true)
		if err != nil {
			for _, q := range t.parts[from:] {
				q.destroy()
			}
			t.parts = t.parts[:from]
			return err
		}
		t.parts = append(t.parts, p)
	}
	return nil
}

func handleUpdateTopic(b *Broker, r *request) reply {
	var req wire.UpdateTopic
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	entries, err := wire.ParseOptionsBlock(req.Options)
	if err != nil {
		return status(codeOf(err))
	}
	// Keys and values are checked before the topic is resolved; the size
	// rule (1019) needs the topic's segment size and is checked below.
	if _, err := wire.ResolveTopicOptions(wire.DefaultTopicOptions(), entries, 0, true); err != nil &&
		!errors.Is(err, wire.ErrInvalidTopicSize) {
		return status(codeOf(err))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	if code := topicMissing(s, t); code != 0 {
		return rejected(code)
	}
	if o := s.topicNamed(req.Name); o != nil && o != t {
		return rejected(wire.ErrTopicNameAlreadyExists.Code)
	}
	opts, err := wire.ResolveTopicOptions(t.opts, entries, uint32(len(t.parts)), true)
	switch {
	case errors.Is(err, wire.ErrInvalidTopicSize):
		return status(wire.ErrInvalidTopicSize.Code) // a pre-commit check upstream
	case err != nil:
		return rejected(codeOf(err))
	}
	oldName, oldOpts := t.name, t.opts
	t.name, t.opts = req.Name, opts
	if err := b.saveMeta(); err != nil {
		t.name, t.opts = oldName, oldOpts
		return b.writeFailed("update topic", err)
	}
	previous := ""
	if oldName != t.name {
		previous = oldName
	}
	b.events.topicEvent(sysevents.TopicUpdated, t, previous)
	return okResult(nil)
}

func handleDeleteTopic(b *Broker, r *request) reply {
	var req wire.TopicRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	if code := topicMissing(s, t); code != 0 {
		return rejected(code)
	}
	delete(s.topics, t.id)
	undo := b.forgetPermissionsOn(s.id, true, t.id)
	if err := b.saveMeta(); err != nil {
		s.topics[t.id] = t
		undo()
		return b.writeFailed("delete topic", err)
	}
	b.destroyTopic(t)
	b.events.topicEvent(sysevents.TopicDeleted, t, "")
	return okResult(nil)
}

func handlePurgeTopic(b *Broker, r *request) reply {
	var req wire.TopicRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	if code := topicMissing(s, t); code != 0 {
		return rejected(code)
	}
	if err := b.purgeTopic(t); err != nil {
		return b.writeFailed("purge topic", err)
	}
	b.events.topicEvent(sysevents.TopicPurged, t, "")
	return okResult(nil)
}

// destroyTopic ends t's groups and deletes its partitions' files. Caller
// holds b.mu for writing and has already unlinked t from its stream.
func (b *Broker) destroyTopic(t *topic) {
	for _, g := range t.groups {
		b.endGroup(g)
	}
	for _, p := range t.parts {
		if err := p.destroy(); err != nil {
			b.log.Warn("deleting partition files failed", "topic", t.name, "partition", p.id, "err", err)
		}
	}
	if b.cfg.DataDir != "" {
		if err := removeAll(b.topicDir(t.uid)); err != nil {
			b.log.Warn("deleting topic directory failed", "topic", t.name, "err", err)
		}
	}
}

// purgeTopic empties every partition of t and forgets their offsets. The
// offsets go first: a crash or failure in between leaves offsets cleared
// over a full log (messages delivered again), never offsets that point
// past an emptied one (openPartition clamps those anyway). Caller holds
// b.mu for writing.
func (b *Broker) purgeTopic(t *topic) error {
	for _, p := range t.parts {
		if err := p.clearOffsets(func(offsetKey) bool { return true }); err != nil {
			return err
		}
		p.mu.Lock()
		err := p.log.Purge()
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	for _, g := range t.groups {
		g.mu.Lock()
		clear(g.polled)
		g.mu.Unlock()
	}
	return nil
}
