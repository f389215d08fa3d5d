package broker

// Permission checks: before a command's handler runs, the gate finds
// what the command needs (the rules table), reads the stream and topic it
// names from the front of the body, resolves them, and asks the session's
// user. Root (user 0) may do everything. A denial is status 41
// (Unauthorized), pre-commit, so it does not use up a request id. A
// session whose user was deleted is denied everything (its connections
// are also evicted when the delete commits; cmd_03x_users.go).
//
// The rules are upstream's (core/server/src/streaming/users/
// permissioner_rules), G global, S the stream's, T the topic's:
//
//	stats, clients, snapshot          G manage_servers | read_servers
//	get_users, get_user               G manage_users | read_users (get_user of oneself: always)
//	create, delete, update user,      G manage_users
//	  update_permissions
//	change_password                   oneself, or G manage_users
//	get_streams                       G manage_streams | read_streams
//	get_stream                        G manage_streams | read_streams, S manage_stream | read_stream
//	create_stream                     G manage_streams
//	update, delete, purge stream      G manage_streams, S manage_stream
//	get_topic(s), consumer groups     G manage_streams | read_streams | manage_topics | read_topics,
//	  (get, list, create, delete,       S manage_topics | read_topics, T manage_topic | read_topic
//	  join, leave, sync)
//	create_topic                      G manage_streams | manage_topics, S manage_topics
//	update, delete, purge topic,      G manage_streams | manage_topics, S manage_topics, T manage_topic
//	  partitions, segments
//	poll, consumer offsets            G poll_messages, S poll_messages | read_stream | manage_topics |
//	                                    read_topics, T poll_messages | read_topic | manage_topic
//	send_messages                     G send_messages, S send_messages | manage_stream | manage_topics,
//	                                    T send_messages | manage_topic
//
// Everything else (ping, get_me, cluster metadata, describe_options, the
// caller's own PATs, logout) needs only a session. Upstream checks
// snapshots only for a session; this broker asks read_servers, since a
// snapshot describes the whole server. A stream or topic that does not
// resolve passes the gate, so the handler answers "not found" as upstream
// does. The gate resolves names and the handler resolves them again: a
// stream renamed or replaced between the two (microseconds, by an
// administrator) is the only way the two can differ.

import "github.com/ferryhq/ferry/iggy/wire"

// right is what a command needs.
type right uint8

const (
	rightSession right = iota // a session, nothing more
	rightReadServers
	rightReadUsers
	rightManageUsers
	rightListStreams
	rightReadStream
	rightCreateStream
	rightManageStream
	rightReadTopic
	rightCreateTopic
	rightManageTopic
	rightPoll
	rightSend
)

var rightNames = [...]string{
	rightSession: "a session", rightReadServers: "read_servers", rightReadUsers: "read_users",
	rightManageUsers: "manage_users", rightListStreams: "read_streams", rightReadStream: "read_stream",
	rightCreateStream: "manage_streams", rightManageStream: "manage_stream", rightReadTopic: "read_topic",
	rightCreateTopic: "manage_topics", rightManageTopic: "manage_topic", rightPoll: "poll_messages",
	rightSend: "send_messages",
}

func (r right) String() string { return rightNames[r] }

// target is where in a request body the stream (and topic) it acts on is.
type target uint8

const (
	noTarget            target = iota
	atStream                   // [stream]...
	atStreamTopic              // [stream][topic]...
	afterConsumer              // [consumer][stream][topic]...
	afterMetadataLength        // [u32][stream][topic]... (send_messages)
	atUser                     // [user]... (the self exemptions)
)

type rule struct {
	need  right
	where target
}

var rules = map[wire.Command]rule{
	wire.CmdGetStats:    {rightReadServers, noTarget},
	wire.CmdGetSnapshot: {rightReadServers, noTarget},
	wire.CmdGetClient:   {rightReadServers, noTarget},
	wire.CmdGetClients:  {rightReadServers, noTarget},

	wire.CmdGetUser:           {rightReadUsers, atUser},
	wire.CmdGetUsers:          {rightReadUsers, noTarget},
	wire.CmdCreateUser:        {rightManageUsers, noTarget},
	wire.CmdDeleteUser:        {rightManageUsers, noTarget},
	wire.CmdUpdateUser:        {rightManageUsers, noTarget},
	wire.CmdUpdatePermissions: {rightManageUsers, noTarget},
	wire.CmdChangePassword:    {rightManageUsers, atUser},

	wire.CmdGetStreams:   {rightListStreams, noTarget},
	wire.CmdGetStream:    {rightReadStream, atStream},
	wire.CmdCreateStream: {rightCreateStream, noTarget},
	wire.CmdUpdateStream: {rightManageStream, atStream},
	wire.CmdDeleteStream: {rightManageStream, atStream},
	wire.CmdPurgeStream:  {rightManageStream, atStream},

	wire.CmdGetTopic:          {rightReadTopic, atStreamTopic},
	wire.CmdGetTopics:         {rightReadTopic, atStream},
	wire.CmdCreateTopic:       {rightCreateTopic, atStream},
	wire.CmdUpdateTopic:       {rightManageTopic, atStreamTopic},
	wire.CmdDeleteTopic:       {rightManageTopic, atStreamTopic},
	wire.CmdPurgeTopic:        {rightManageTopic, atStreamTopic},
	wire.CmdCreatePartitions:  {rightManageTopic, atStreamTopic},
	wire.CmdDeletePartitions:  {rightManageTopic, atStreamTopic},
	wire.CmdDeleteSegments:    {rightManageTopic, atStreamTopic},
	wire.CmdGetConsumerGroup:  {rightReadTopic, atStreamTopic},
	wire.CmdGetConsumerGroups: {rightReadTopic, atStreamTopic},

	wire.CmdCreateConsumerGroup: {rightReadTopic, atStreamTopic},
	wire.CmdDeleteConsumerGroup: {rightReadTopic, atStreamTopic},
	wire.CmdJoinConsumerGroup:   {rightReadTopic, atStreamTopic},
	wire.CmdLeaveConsumerGroup:  {rightReadTopic, atStreamTopic},
	wire.CmdSyncConsumerGroup:   {rightReadTopic, atStreamTopic},

	wire.CmdPollMessages:         {rightPoll, afterConsumer},
	wire.CmdGetConsumerOffset:    {rightPoll, afterConsumer},
	wire.CmdStoreConsumerOffset:  {rightPoll, afterConsumer},
	wire.CmdDeleteConsumerOffset: {rightPoll, afterConsumer},
	wire.CmdSendMessages:         {rightSend, afterMetadataLength},
}

// gate checks the session's user may run r. It answers the denial when
// not. It runs on the connection's reader goroutine, before the handler.
func (b *Broker) gate(r *request) (reply, bool) {
	_, _, _, uid := r.c.sessionInfo()
	if uid == rootUserID {
		return reply{}, true // root may do everything, and is the hot path
	}
	ru, ok := rules[r.cmd()]
	if !ok {
		ru = rule{rightSession, noTarget}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	u := b.users[uid]
	if u == nil {
		return b.denied(r, uid, rightSession, "the user was deleted"), false
	}
	if ru.need == rightSession {
		return reply{}, true
	}
	var sid, tid uint32
	var haveStream, haveTopic bool
	switch ru.where {
	case atUser:
		var ref wire.UserRef
		if wire.DecodeRequest(r.body, &ref) == nil {
			if t := b.userBy(ref.User); t == nil || t == u {
				return reply{}, true // oneself, or missing: the handler answers
			}
		}
	case atStream, atStreamTopic, afterConsumer, afterMetadataLength:
		d := wire.NewDecoder(r.body)
		switch ru.where {
		case afterConsumer:
			d.Consumer("consumer")
		case afterMetadataLength:
			d.U32("metadata length")
		}
		sref := d.Identifier("stream id")
		var tref wire.Identifier
		if ru.where != atStream {
			tref = d.Identifier("topic id")
		}
		if d.Err() != nil {
			return reply{}, true // the handler answers the malformed body
		}
		s := b.streamBy(sref)
		if s == nil {
			return reply{}, true // the handler answers "not found"
		}
		sid, haveStream = s.id, true
		if ru.where != atStream {
			t := s.topicBy(tref)
			if t == nil {
				return reply{}, true
			}
			tid, haveTopic = t.id, true
		}
	}
	if u.may(ru.need, sid, haveStream, tid, haveTopic) {
		return reply{}, true
	}
	return b.denied(r, uid, ru.need, u.name), false
}

// denied logs a denial and answers status 41.
func (b *Broker) denied(r *request, uid uint32, need right, who string) reply {
	b.log.Debug("permission denied", "conn", r.c.id, "user_id", uid, "user", who, "command", r.cmd(), "needs", need)
	return status(wire.ErrUnauthorized.Code)
}

// may reports whether u holds right need, on stream sid and topic tid
// when the command names them.
func (u *user) may(need right, sid uint32, haveStream bool, tid uint32, haveTopic bool) bool {
	if u.id == rootUserID {
		return true
	}
	p := u.perms
	if p == nil {
		return false
	}
	g := p.Global
	var s *wire.StreamPermissions
	if haveStream {
		s = p.Streams[sid]
	}
	var t *wire.TopicPermissions
	if s != nil && haveTopic {
		t = s.Topics[tid]
	}
	if s == nil {
		s = &wire.StreamPermissions{}
	}
	if t == nil {
		t = &wire.TopicPermissions{}
	}
	switch need {
	case rightReadServers:
		return g.ManageServers || g.ReadServers
	case rightReadUsers:
		return g.ManageUsers || g.ReadUsers
	case rightManageUsers:
		return g.ManageUsers
	case rightListStreams:
		return g.ManageStreams || g.ReadStreams
	case rightReadStream:
		return g.ManageStreams || g.ReadStreams || s.ManageStream || s.ReadStream
	case rightCreateStream:
		return g.ManageStreams
	case rightManageStream:
		return g.ManageStreams || s.ManageStream
	case rightReadTopic:
		return g.ManageStreams || g.ReadStreams || g.ManageTopics || g.ReadTopics ||
			s.ManageTopics || s.ReadTopics || t.ManageTopic || t.ReadTopic
	case rightCreateTopic:
		return g.ManageStreams || g.ManageTopics || s.ManageTopics
	case rightManageTopic:
		return g.ManageStreams || g.ManageTopics || s.ManageTopics || t.ManageTopic
	case rightPoll:
		return g.PollMessages || s.PollMessages || s.ReadStream || s.ManageTopics || s.ReadTopics ||
			t.PollMessages || t.ReadTopic || t.ManageTopic
	case rightSend:
		return g.SendMessages || s.SendMessages || s.ManageStream || s.ManageTopics ||
			t.SendMessages || t.ManageTopic
	}
	return true // rightSession
}
