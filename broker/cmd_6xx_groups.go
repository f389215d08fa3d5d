package broker

// Consumer groups (codes 600-606); assignment rules are in groups.go.
//
// get_consumer_group (600) answers GroupDetails or an empty body for a
// missing group (a missing stream/topic is status 1009/2010);
// get_consumer_groups (601) the headers back to back by id.
// create_consumer_group (602, op 139) takes the topic's next group id (ids
// are never reused) and replies GroupDetails with no members; a taken name
// is the committed 5004. delete (603, op 140) also drops the group's
// offsets. join (604, op 148) is idempotent; leave (605, op 149) by a
// non-member is the committed 5006. Missing stream/topic/group are the
// committed 1009/2010/5000. sync (606) is keyed by the header's client id
// and answers [generation u64][count u32][pollable partitions], or an
// empty body when the caller is not a member or nothing resolves.

import (
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

func handleGetConsumerGroup(b *Broker, r *request) reply {
	var req wire.GroupRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	if code := topicMissing(s, t); code != 0 {
		return status(code)
	}
	g := t.groupBy(req.Group)
	if g == nil {
		return raw(nil)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.details()
	return rawOf(&d)
}

func handleGetConsumerGroups(b *Broker, r *request) reply {
	var req wire.TopicRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	if code := topicMissing(s, t); code != 0 {
		return status(code)
	}
	list := wire.GroupList{}
	for _, id := range sortedKeys(t.groups) {
		g := t.groups[id]
		g.mu.Lock()
		list = append(list, g.headerLocked())
		g.mu.Unlock()
	}
	return rawOf(&list)
}

func handleCreateConsumerGroup(b *Broker, r *request) reply {
	var req wire.CreateConsumerGroup
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	switch {
	case s == nil:
		return rejected(wire.ErrStreamIDNotFound.Code)
	case t == nil:
		return rejected(wire.ErrTopicIDNotFound.Code)
	case t.groupBy(wire.NamedID(req.Name)) != nil:
		return rejected(wire.ErrConsumerGroupNameAlreadyExists.Code)
	}
	g := newGroup(t, t.nextGroup, req.Name)
	t.groups[g.id] = g
	t.nextGroup++
	if err := b.saveMeta(); err != nil {
		delete(t.groups, g.id)
		t.nextGroup--
		return b.writeFailed("create consumer group", err)
	}
	d := wire.GroupDetails{GroupHeader: g.headerLocked()}
	return okResult(&d)
}

// resolveGroup resolves a group for a metadata op, or the committed
// rejection. Caller holds b.mu.
func (b *Broker) resolveGroup(ref wire.GroupRef) (*group, reply, bool) {
	s, t := b.lookupTopic(ref.Stream, ref.Topic)
	switch {
	case s == nil:
		return nil, rejected(wire.ErrStreamIDNotFound.Code), false
	case t == nil:
		return nil, rejected(wire.ErrTopicIDNotFound.Code), false
	}
	g := t.groupBy(ref.Group)
	if g == nil {
		return nil, rejected(wire.ErrConsumerGroupIDNotFound.Code), false
	}
	return g, reply{}, true
}

func handleDeleteConsumerGroup(b *Broker, r *request) reply {
	var req wire.GroupRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	g, rep, ok := b.resolveGroup(req)
	if !ok {
		return rep
	}
	delete(g.topic.groups, g.id)
	if err := b.saveMeta(); err != nil {
		g.topic.groups[g.id] = g
		return b.writeFailed("delete consumer group", err)
	}
	b.endGroup(g)
	key := offsetKey{wire.ConsumerGroup, g.id}
	for _, p := range g.topic.parts {
		if err := p.clearOffsets(func(k offsetKey) bool { return k == key }); err != nil {
			b.log.Warn("dropping a deleted group's offsets failed", "group", g.name, "partition", p.id, "err", err)
		}
	}
	return okResult(nil)
}

// endGroup marks g deleted and forgets it in its members' connections.
func (b *Broker) endGroup(g *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleted = true
	for _, m := range g.members {
		m.conn.mu.Lock()
		delete(m.conn.groups, g)
		m.conn.mu.Unlock()
	}
	g.members = nil
	clear(g.owner)
	clear(g.pending)
}

func handleJoinConsumerGroup(b *Broker, r *request) reply {
	var req wire.GroupRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	c := r.c
	_, _, client, _ := c.sessionInfo()
	b.mu.RLock()
	defer b.mu.RUnlock()
	g, rep, ok := b.resolveGroup(req)
	if !ok {
		return rep
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return rejected(wire.ErrConsumerGroupIDNotFound.Code)
	}
	if g.memberByClient(client) != nil {
		return okResult(nil)
	}
	m := &member{id: g.nextMemberID(), client: client, conn: c}
	g.ev = b.events
	t := g.topic
	inflight := func(pid uint32) bool { return g.inflight(t.parts[pid]) }
	g.join(m, len(t.parts), inflight, time.Now().Add(b.cfg.RebalancingTimeout))
	g.ev.groupEvent(sysevents.GroupJoined, g, m, sysevents.ReasonJoined)
	c.mu.Lock()
	c.groups[g] = struct{}{}
	c.mu.Unlock()
	b.log.Debug("member joined", "group", g.name, "member", m.id, "generation", g.generation)
	return okResult(nil)
}

func handleLeaveConsumerGroup(b *Broker, r *request) reply {
	var req wire.GroupRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	c := r.c
	_, _, client, _ := c.sessionInfo()
	b.mu.RLock()
	defer b.mu.RUnlock()
	g, rep, ok := b.resolveGroup(req)
	if !ok {
		return rep
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.memberByClient(client)
	if m == nil || g.deleted {
		return rejected(wire.ErrConsumerGroupMemberNotFound.Code)
	}
	g.remove(m, len(g.parts), sysevents.ReasonLeft)
	c.mu.Lock()
	delete(c.groups, g)
	c.mu.Unlock()
	return okResult(nil)
}

func handleSyncConsumerGroup(b *Broker, r *request) reply {
	var req wire.GroupRef
	if err := wire.DecodeRequest(r.body, &req); err != nil {
		return raw(nil)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, t := b.lookupTopic(req.Stream, req.Topic)
	if t == nil {
		return raw(nil)
	}
	g := t.groupBy(req.Group)
	if g == nil {
		return raw(nil)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.memberByClient(r.h.Client)
	if m == nil || g.deleted {
		return raw(nil)
	}
	g.settleAll(time.Now())
	return rawOf(&wire.SyncGroupReply{Generation: g.generation, Partitions: g.pollable(m)})
}
