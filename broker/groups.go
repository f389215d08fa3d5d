package broker

// Consumer-group membership and partition assignment (fact sheet §7).
//
// A member is a connection, known by the client id it registered with.
// Every membership change bumps the group's generation.
//
//   - Leave, remove (disconnect, logout, stale eviction) and repartition
//     reset the assignment: partition i goes to member i % n, members in
//     join order.
//   - Join is cooperative: partitions nobody owns go to idle members (those
//     with no partitions); then each member above its fair share (n/m, the
//     first n%m members in join order get one more) hands its highest
//     partitions to idle members up to their share. A partition moves at
//     once when nothing is in flight on it (the owner has committed at or
//     past the last offset a poll served it); otherwise it becomes a
//     pending revocation: the old owner may still commit it but no longer
//     poll it, and it moves when the old owner commits past what it polled
//     or RebalancingTimeout passes (bumping the generation again).
//
// A group poll is fenced: the caller must own the partition and it must
// not be pending revocation. Storing or deleting a group offset needs
// ownership (pending allowed).

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

// group is one consumer group of a topic. id, name and topic are fixed
// (name under Broker.mu); everything else is guarded by mu.
type group struct {
	topic *topic
	id    uint32
	name  string

	mu sync.Mutex
	// parts is a copy of topic.parts, refreshed (under Broker.mu for
	// writing and mu) on every repartition, so the janitor and a leaving
	// connection can work on the group without Broker.mu.
	parts      []*partition
	deleted    bool
	generation uint64
	members    []*member // join order
	owner      map[uint32]*member
	pending    map[uint32]*revocation
	polled     map[uint32]uint64 // last offset a poll served the owner
	// ev publishes the group's rebalances; set at its first join (nil
	// with events off). See events_points.go.
	ev *eventPub
}

type member struct {
	id     uint32 // lowest free slot, 0-based
	client wire.U128
	conn   *conn
}

type revocation struct {
	to       *member
	deadline time.Time
}

// newGroup makes a group of t. Caller holds Broker.mu.
func newGroup(t *topic, id uint32, name string) *group {
	return &group{
		topic: t, id: id, name: name, parts: slices.Clone(t.parts),
		owner: map[uint32]*member{}, pending: map[uint32]*revocation{}, polled: map[uint32]uint64{},
	}
}

func (g *group) memberByClient(client wire.U128) *member {
	for _, m := range g.members {
		if m.client == client {
			return m
		}
	}
	return nil
}

func (g *group) nextMemberID() uint32 {
	used := map[uint32]bool{}
	for _, m := range g.members {
		used[m.id] = true
	}
	for i := uint32(0); ; i++ {
		if !used[i] {
			return i
		}
	}
}

// reset assigns partitions 0..n-1 round-robin over the members in join
// order and clears pending revocations; reason and m say why, for the
// group.rebalanced event. Caller holds g.mu.
func (g *group) reset(n int, reason string, m *member) {
	old := g.owner
	g.owner = make(map[uint32]*member, n)
	g.pending = map[uint32]*revocation{}
	if len(g.members) > 0 {
		for p := 0; p < n; p++ {
			g.owner[uint32(p)] = g.members[p%len(g.members)]
		}
	}
	for p := range g.polled {
		if g.owner[p] == nil || g.owner[p] != old[p] {
			delete(g.polled, p)
		}
	}
	g.generation++
	g.rebalanced(reason, m)
}

// remove drops m and resets the assignment; reason is why it left
// (sysevents.ReasonLeft or ReasonDisconnected). Caller holds g.mu.
func (g *group) remove(m *member, n int, reason string) {
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i:i], g.members[i+1:]...)
			break
		}
	}
	g.ev.groupEvent(sysevents.GroupLeft, g, m, reason)
	g.reset(n, reason, m)
}

// join adds m and moves partitions to it cooperatively. inflight reports
// whether a partition has polled-but-uncommitted messages. Caller holds
// g.mu and Broker.mu (read).
func (g *group) join(m *member, n int, inflight func(pid uint32) bool, deadline time.Time) {
	g.members = append(g.members, m)
	g.generation++
	defer g.rebalanced(sysevents.ReasonJoined, m)
	load := map[*member]int{}
	owned := map[*member][]uint32{} // movable partitions, ascending
	for p := uint32(0); p < uint32(n); p++ {
		o := g.owner[p]
		switch rv := g.pending[p]; {
		case o == nil:
		case rv != nil:
			load[rv.to]++
		default:
			load[o]++
			owned[o] = append(owned[o], p)
		}
	}
	quota := func(i int) int {
		q := n / len(g.members)
		if i < n%len(g.members) {
			q++
		}
		return q
	}
	var idle []*member
	need := map[*member]int{}
	for i, x := range g.members {
		if load[x] == 0 {
			idle = append(idle, x)
			need[x] = quota(i)
		}
	}
	if len(idle) == 0 {
		return
	}
	cursor := 0
	pick := func(mustNeed bool) *member {
		for k := 0; k < len(idle); k++ {
			x := idle[(cursor+k)%len(idle)]
			if need[x] > 0 {
				cursor = (cursor + k + 1) % len(idle)
				return x
			}
		}
		if mustNeed {
			return nil
		}
		x := idle[cursor%len(idle)]
		cursor++
		return x
	}
	for p := uint32(0); p < uint32(n); p++ {
		if g.owner[p] == nil {
			x := pick(false)
			g.owner[p] = x
			need[x]--
		}
	}
	for i, x := range g.members {
		excess := load[x] - quota(i)
		list := owned[x]
		for j := len(list) - 1; j >= 0 && excess > 0; j-- {
			to := pick(true)
			if to == nil {
				return
			}
			p := list[j]
			need[to]--
			excess--
			if inflight(p) {
				g.pending[p] = &revocation{to: to, deadline: deadline}
				continue
			}
			g.owner[p] = to
			delete(g.polled, p)
		}
	}
}

// inflight reports whether the owner of p was served messages it has not
// committed. Caller holds g.mu.
func (g *group) inflight(p *partition) bool {
	last, ok := g.polled[p.id]
	if !ok {
		return false
	}
	stored, ok := p.getOffset(offsetKey{wire.ConsumerGroup, g.id})
	return !ok || stored < last
}

// settle completes the pending revocation of p if its old owner has
// committed what it polled or the deadline has passed. Caller holds g.mu.
func (g *group) settle(p *partition, now time.Time) {
	rv := g.pending[p.id]
	if rv == nil || (g.inflight(p) && now.Before(rv.deadline)) {
		return
	}
	delete(g.pending, p.id)
	delete(g.polled, p.id)
	g.owner[p.id] = rv.to
	g.generation++
	g.rebalanced(sysevents.ReasonSettled, nil)
}

// settleAll settles every pending revocation. Caller holds g.mu.
func (g *group) settleAll(now time.Time) {
	for pid := range g.pending {
		if int64(pid) < int64(len(g.parts)) {
			g.settle(g.parts[pid], now)
		} else {
			delete(g.pending, pid)
		}
	}
}

// canPoll is the poll fence: client owns pid and it is not pending.
func (g *group) canPoll(client wire.U128, pid uint32) bool {
	o := g.owner[pid]
	return o != nil && o.client == client && g.pending[pid] == nil
}

// canCommit: client owns pid, pending revocation or not.
func (g *group) canCommit(client wire.U128, pid uint32) bool {
	o := g.owner[pid]
	return o != nil && o.client == client
}

// pollable lists the partitions m may poll, ascending.
func (g *group) pollable(m *member) []uint32 {
	out := []uint32{}
	for p, o := range g.owner {
		if o == m && g.pending[p] == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// details builds GroupDetails: members in join order with the partitions
// they own (pending revocations included). Caller holds g.mu.
func (g *group) details() wire.GroupDetails {
	d := wire.GroupDetails{GroupHeader: g.headerLocked()}
	for _, m := range g.members {
		gm := wire.GroupMember{ID: m.id, Partitions: []uint32{}}
		for p, o := range g.owner {
			if o == m {
				gm.Partitions = append(gm.Partitions, p)
			}
		}
		sort.Slice(gm.Partitions, func(i, j int) bool { return gm.Partitions[i] < gm.Partitions[j] })
		d.Members = append(d.Members, gm)
	}
	return d
}

func (g *group) headerLocked() wire.GroupHeader {
	return wire.GroupHeader{
		ID: g.id, PartitionsCount: uint32(len(g.parts)), MembersCount: uint32(len(g.members)), Name: g.name,
	}
}

// leaveAll removes the member with client id client (a connection that
// logged out or disconnected) from groups and rebalances them. It takes
// each group's mu without Broker.mu (see locksordering.txt).
func (b *Broker) leaveAll(client wire.U128, groups map[*group]struct{}) {
	for g := range groups {
		g.mu.Lock()
		if m := g.memberByClient(client); m != nil && !g.deleted {
			g.remove(m, len(g.parts), sysevents.ReasonDisconnected)
			b.log.Debug("member left on disconnect", "group", g.name, "generation", g.generation)
		}
		g.mu.Unlock()
	}
}

// resetGroups resets every group of t after a repartition. Caller holds
// Broker.mu for writing.
func (t *topic) resetGroups() {
	for _, g := range t.groups {
		g.mu.Lock()
		g.parts = slices.Clone(t.parts)
		g.reset(len(t.parts), sysevents.ReasonRepartition, nil)
		for pid := range g.polled {
			if int(pid) >= len(t.parts) {
				delete(g.polled, pid)
			}
		}
		g.mu.Unlock()
	}
}

// expireRevocations settles revocations whose deadline passed (janitor).
// The groups are listed under Broker.mu and settled after it is released:
// a group poll holds g.mu across a disk read, and waiting for it with
// Broker.mu read-locked would stall every request behind a queued
// metadata change.
func (b *Broker) expireRevocations(now time.Time) {
	var groups []*group
	b.mu.RLock()
	for _, s := range b.streams {
		for _, t := range s.topics {
			for _, g := range t.groups {
				groups = append(groups, g)
			}
		}
	}
	b.mu.RUnlock()
	for _, g := range groups {
		g.mu.Lock()
		if len(g.pending) > 0 && !g.deleted {
			g.settleAll(now)
		}
		g.mu.Unlock()
	}
}
