package wire

import "math"

// Reply payloads, after the result section where a reply has one.

// StreamHeader describes one stream (get_streams entries, the head of
// StreamDetails).
type StreamHeader struct {
	ID            uint32
	CreatedAt     uint64 // µs since the epoch
	TopicsCount   uint32
	SizeBytes     uint64
	MessagesCount uint64
	Name          string
	Options       []Entry
}

func (s *StreamHeader) AppendTo(b []byte) []byte {
	b = appendU64(appendU32(b, s.ID), s.CreatedAt)
	b = appendU64(appendU32(b, s.TopicsCount), s.SizeBytes)
	b = appendString8(appendU64(b, s.MessagesCount), s.Name)
	return AppendOptionsReply(b, s.Options)
}

func (s *StreamHeader) DecodeFrom(d *Decoder) {
	s.ID = d.U32("stream id")
	s.CreatedAt = d.U64("created at")
	s.TopicsCount = d.U32("topics count")
	s.SizeBytes = d.U64("size bytes")
	s.MessagesCount = d.U64("messages count")
	s.Name = d.Name("stream name")
	s.Options = d.OptionsReply("stream options")
}

// StreamDetails is the reply of get_stream (200) and create_stream (202).
type StreamDetails struct {
	StreamHeader
	Topics []TopicHeader
}

func (s *StreamDetails) AppendTo(b []byte) []byte {
	h := s.StreamHeader
	h.TopicsCount = uint32(len(s.Topics))
	b = h.AppendTo(b)
	for i := range s.Topics {
		b = s.Topics[i].AppendTo(b)
	}
	return b
}

func (s *StreamDetails) DecodeFrom(d *Decoder) {
	s.StreamHeader.DecodeFrom(d)
	for i := uint32(0); i < s.TopicsCount && d.Err() == nil; i++ {
		var t TopicHeader
		t.DecodeFrom(d)
		s.Topics = append(s.Topics, t)
	}
}

// StreamList is the reply of get_streams (201): headers back to back.
type StreamList []StreamHeader

func (l *StreamList) AppendTo(b []byte) []byte {
	for i := range *l {
		b = (*l)[i].AppendTo(b)
	}
	return b
}

func (l *StreamList) DecodeFrom(d *Decoder) {
	*l = StreamList{}
	for d.Remaining() > 0 && d.Err() == nil {
		var s StreamHeader
		s.DecodeFrom(d)
		*l = append(*l, s)
	}
}

// TopicHeader describes one topic.
type TopicHeader struct {
	ID              uint32
	CreatedAt       uint64
	PartitionsCount uint32
	MessageExpiry   uint64 // µs; Unlimited = never
	Compression     uint8
	MaxTopicSize    uint64 // bytes; Unlimited = no limit
	SizeBytes       uint64
	MessagesCount   uint64
	Name            string
	Explicit        []Entry // options the creator set
	Derived         []Entry // every other catalog option, resolved
}

func (t *TopicHeader) AppendTo(b []byte) []byte {
	b = appendU64(appendU32(b, t.ID), t.CreatedAt)
	b = appendU64(appendU32(b, t.PartitionsCount), t.MessageExpiry)
	b = appendU64(append(b, t.Compression), t.MaxTopicSize)
	b = appendU64(appendU64(b, t.SizeBytes), t.MessagesCount)
	b = appendString8(b, t.Name)
	return AppendOptionsReply(AppendOptionsReply(b, t.Explicit), t.Derived)
}

func (t *TopicHeader) DecodeFrom(d *Decoder) {
	t.ID = d.U32("topic id")
	t.CreatedAt = d.U64("created at")
	t.PartitionsCount = d.U32("partitions count")
	t.MessageExpiry = d.U64("message expiry")
	t.Compression = d.U8("compression")
	t.MaxTopicSize = d.U64("max topic size")
	t.SizeBytes = d.U64("size bytes")
	t.MessagesCount = d.U64("messages count")
	t.Name = d.Name("topic name")
	t.Explicit = d.OptionsReply("explicit options")
	t.Derived = d.OptionsReply("derived options")
}

// Option returns the topic's value for an option key from either block.
func (t *TopicHeader) Option(key string) (Value, bool) {
	if v, ok := Lookup(t.Explicit, key); ok {
		return v, true
	}
	return Lookup(t.Derived, key)
}

// PartitionInfo is one 40-byte partition entry of TopicDetails.
type PartitionInfo struct {
	ID            uint32
	CreatedAt     uint64
	SegmentsCount uint32
	CurrentOffset uint64
	SizeBytes     uint64
	MessagesCount uint64
}

func (p *PartitionInfo) AppendTo(b []byte) []byte {
	b = appendU64(appendU32(b, p.ID), p.CreatedAt)
	b = appendU64(appendU32(b, p.SegmentsCount), p.CurrentOffset)
	return appendU64(appendU64(b, p.SizeBytes), p.MessagesCount)
}

func (p *PartitionInfo) DecodeFrom(d *Decoder) {
	p.ID = d.U32("partition id")
	p.CreatedAt = d.U64("created at")
	p.SegmentsCount = d.U32("segments count")
	p.CurrentOffset = d.U64("current offset")
	p.SizeBytes = d.U64("size bytes")
	p.MessagesCount = d.U64("messages count")
}

// TopicDetails is the reply of get_topic (300) and create_topic (302).
type TopicDetails struct {
	TopicHeader
	Partitions []PartitionInfo
}

func (t *TopicDetails) AppendTo(b []byte) []byte {
	b = t.TopicHeader.AppendTo(b)
	for i := range t.Partitions {
		b = t.Partitions[i].AppendTo(b)
	}
	return b
}

func (t *TopicDetails) DecodeFrom(d *Decoder) {
	t.TopicHeader.DecodeFrom(d)
	for d.Remaining() > 0 && d.Err() == nil {
		var p PartitionInfo
		p.DecodeFrom(d)
		t.Partitions = append(t.Partitions, p)
	}
}

// TopicList is the reply of get_topics (301): [count u32] then headers.
type TopicList []TopicHeader

func (l *TopicList) AppendTo(b []byte) []byte {
	b = appendU32(b, uint32(len(*l)))
	for i := range *l {
		b = (*l)[i].AppendTo(b)
	}
	return b
}

func (l *TopicList) DecodeFrom(d *Decoder) {
	*l = TopicList{}
	n := d.U32("topics count")
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		var t TopicHeader
		t.DecodeFrom(d)
		*l = append(*l, t)
	}
}

// GroupHeader describes one consumer group.
type GroupHeader struct {
	ID              uint32
	PartitionsCount uint32
	MembersCount    uint32
	Name            string
}

func (g *GroupHeader) AppendTo(b []byte) []byte {
	b = appendU32(appendU32(appendU32(b, g.ID), g.PartitionsCount), g.MembersCount)
	return appendString8(b, g.Name)
}

func (g *GroupHeader) DecodeFrom(d *Decoder) {
	g.ID = d.U32("group id")
	g.PartitionsCount = d.U32("partitions count")
	g.MembersCount = d.U32("members count")
	g.Name = d.Name("group name")
}

// GroupMember is one member of GroupDetails with its partitions.
type GroupMember struct {
	ID         uint32
	Partitions []uint32
}

// GroupDetails is the reply of get_consumer_group (600) and
// create_consumer_group (602).
type GroupDetails struct {
	GroupHeader
	Members []GroupMember
}

func (g *GroupDetails) AppendTo(b []byte) []byte {
	h := g.GroupHeader
	h.MembersCount = uint32(len(g.Members))
	b = h.AppendTo(b)
	for _, m := range g.Members {
		b = appendU32(appendU32(b, m.ID), uint32(len(m.Partitions)))
		for _, p := range m.Partitions {
			b = appendU32(b, p)
		}
	}
	return b
}

func (g *GroupDetails) DecodeFrom(d *Decoder) {
	g.GroupHeader.DecodeFrom(d)
	for d.Remaining() > 0 && d.Err() == nil {
		m := GroupMember{ID: d.U32("member id")}
		n := d.U32("member partitions count")
		if uint64(n)*4 > uint64(d.Remaining()) {
			d.Failf("member has %d partitions, %d bytes left", n, d.Remaining())
			return
		}
		for i := uint32(0); i < n; i++ {
			m.Partitions = append(m.Partitions, d.U32("member partition"))
		}
		g.Members = append(g.Members, m)
	}
}

// GroupList is the reply of get_consumer_groups (601): headers back to back.
type GroupList []GroupHeader

func (l *GroupList) AppendTo(b []byte) []byte {
	for i := range *l {
		b = (*l)[i].AppendTo(b)
	}
	return b
}

func (l *GroupList) DecodeFrom(d *Decoder) {
	*l = GroupList{}
	for d.Remaining() > 0 && d.Err() == nil {
		var g GroupHeader
		g.DecodeFrom(d)
		*l = append(*l, g)
	}
}

// SyncGroupReply is the reply of sync_consumer_group (606); an empty body
// (not decoded with this type) means "not a member".
type SyncGroupReply struct {
	Generation uint64
	Partitions []uint32
}

func (s *SyncGroupReply) AppendTo(b []byte) []byte {
	b = appendU32(appendU64(b, s.Generation), uint32(len(s.Partitions)))
	for _, p := range s.Partitions {
		b = appendU32(b, p)
	}
	return b
}

func (s *SyncGroupReply) DecodeFrom(d *Decoder) {
	s.Generation = d.U64("generation")
	n := d.U32("partitions count")
	if uint64(n)*4 != uint64(d.Remaining()) {
		d.Failf("sync reply lists %d partitions in %d bytes", n, d.Remaining())
		return
	}
	s.Partitions = make([]uint32, n)
	for i := range s.Partitions {
		s.Partitions[i] = d.U32("partition id")
	}
}

// ConsumerOffsetInfo is the 20-byte reply of get_consumer_offset (120).
type ConsumerOffsetInfo struct {
	PartitionID   uint32
	CurrentOffset uint64
	StoredOffset  uint64
}

func (o *ConsumerOffsetInfo) AppendTo(b []byte) []byte {
	return appendU64(appendU64(appendU32(b, o.PartitionID), o.CurrentOffset), o.StoredOffset)
}

func (o *ConsumerOffsetInfo) DecodeFrom(d *Decoder) {
	o.PartitionID = d.U32("partition id")
	o.CurrentOffset = d.U64("current offset")
	o.StoredOffset = d.U64("stored offset")
}

// SendConfirmation is one 20-byte entry of the send_messages reply.
type SendConfirmation struct {
	Stream, Topic, Partition uint32
	BaseOffset               uint64
}

// SendReply is the raw reply of send_messages (101).
type SendReply []SendConfirmation

func (r *SendReply) AppendTo(b []byte) []byte {
	b = appendU32(b, uint32(len(*r)))
	for _, c := range *r {
		b = appendU64(appendU32(appendU32(appendU32(b, c.Stream), c.Topic), c.Partition), c.BaseOffset)
	}
	return b
}

func (r *SendReply) DecodeFrom(d *Decoder) {
	n := d.U32("confirmations count")
	if uint64(n)*20 != uint64(d.Remaining()) {
		d.Failf("send reply declares %d confirmations in %d bytes", n, d.Remaining())
		return
	}
	*r = make(SendReply, n)
	for i := range *r {
		c := &(*r)[i]
		c.Stream, c.Topic, c.Partition = d.U32("stream id"), d.U32("topic id"), d.U32("partition id")
		c.BaseOffset = d.U64("base offset")
	}
}

// Poll reply sentinels in the partition_id field.
const (
	// PollResync means the group member must re-sync: it does not own the
	// partition it polled, or the partition is pending revocation.
	PollResync uint32 = math.MaxUint32
	// PollNoPartition is what clients use locally for "no partition assigned".
	PollNoPartition uint32 = math.MaxUint32 - 1
)

// PollReply is the reply of poll_messages (100):
// [partition_id u32][current_offset u64][count u32] then batch records.
type PollReply struct {
	PartitionID   uint32
	CurrentOffset uint64
	Messages      []Message
}

// AppendPollReplyHeader appends the 16-byte prefix; the caller appends
// count frames' worth of batch records after it.
func AppendPollReplyHeader(b []byte, partition uint32, current uint64, count uint32) []byte {
	return appendU32(appendU64(appendU32(b, partition), current), count)
}

// DecodeFrom reads the prefix and every record; messages alias the body.
// The count must equal the number of frames in the records.
func (r *PollReply) DecodeFrom(d *Decoder) {
	r.PartitionID = d.U32("partition id")
	r.CurrentOffset = d.U64("current offset")
	count := d.U32("messages count")
	if d.Err() != nil {
		return
	}
	r.Messages = r.Messages[:0]
	for d.Remaining() > 0 && d.Err() == nil {
		h, err := DecodeBatchHeader(d.b[d.off:])
		if err != nil {
			d.Fail(err)
			return
		}
		if h.Length < BatchHeaderSize || h.Length > uint64(d.Remaining()) {
			d.Failf("record batch_length %d, %d bytes left", h.Length, d.Remaining())
			return
		}
		rec := d.Bytes(int(h.Length), "record")
		if r.Messages, err = AppendRecordMessages(r.Messages, rec); err != nil {
			d.Fail(err)
			return
		}
	}
	if d.Err() == nil && uint64(len(r.Messages)) != uint64(count) {
		d.Failf("poll reply says %d messages, records hold %d", count, len(r.Messages))
	}
}

// ClusterNode is one node of get_cluster_metadata (12).
type ClusterNode struct {
	Name                string
	IP                  string
	TCP, QUIC, HTTP, WS uint16
	Role                uint8 // 0 leader, 1 follower
	Status              uint8 // 0 healthy
}

// ClusterMetadata is the reply of get_cluster_metadata (12).
type ClusterMetadata struct {
	Name  string
	Nodes []ClusterNode
}

func (c *ClusterMetadata) AppendTo(b []byte) []byte {
	b = appendU32(appendString32(b, c.Name), uint32(len(c.Nodes)))
	for _, n := range c.Nodes {
		b = appendString32(appendString32(b, n.Name), n.IP)
		b = appendU16(appendU16(appendU16(appendU16(b, n.TCP), n.QUIC), n.HTTP), n.WS)
		b = append(b, n.Role, n.Status)
	}
	return b
}

func (c *ClusterMetadata) DecodeFrom(d *Decoder) {
	c.Name = d.String32("cluster name")
	n := d.U32("nodes count")
	if n > 64 {
		d.Failf("cluster lists %d nodes, at most 64", n)
		return
	}
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		var node ClusterNode
		node.Name = d.String32("node name")
		node.IP = d.String32("node ip")
		node.TCP, node.QUIC = d.U16("tcp port"), d.U16("quic port")
		node.HTTP, node.WS = d.U16("http port"), d.U16("ws port")
		node.Role, node.Status = d.U8("role"), d.U8("status")
		if node.Role > 1 || node.Status > 5 {
			d.Failf("node %d has role %d, status %d", i, node.Role, node.Status)
		}
		c.Nodes = append(c.Nodes, node)
	}
}

// ClientInfo is a get_clients (22) entry; with Groups it is the reply of
// get_client (21) and get_me (20).
type ClientInfo struct {
	ClientID    uint32
	UserID      uint32 // math.MaxUint32 before login
	Transport   uint8  // 1 tcp, 2 quic, 4 ws
	Address     string
	GroupsCount uint32
	Groups      []ClientGroup
}

// ClientGroup is one group a client belongs to.
type ClientGroup struct{ Stream, Topic, Group uint32 }

// AppendHeaderTo appends the ClientHeader form (no group list).
func (c *ClientInfo) AppendHeaderTo(b []byte) []byte {
	b = append(appendU32(appendU32(b, c.ClientID), c.UserID), c.Transport)
	return appendU32(appendString32(b, c.Address), c.GroupsCount)
}

// AppendTo appends the ClientDetails form.
func (c *ClientInfo) AppendTo(b []byte) []byte {
	h := *c
	h.GroupsCount = uint32(len(c.Groups))
	b = h.AppendHeaderTo(b)
	for _, g := range c.Groups {
		b = appendU32(appendU32(appendU32(b, g.Stream), g.Topic), g.Group)
	}
	return b
}

func (c *ClientInfo) decodeHeader(d *Decoder) {
	c.ClientID = d.U32("client id")
	c.UserID = d.U32("user id")
	c.Transport = d.U8("transport")
	c.Address = d.String32("address")
	c.GroupsCount = d.U32("groups count")
}

// DecodeFrom reads the ClientDetails form.
func (c *ClientInfo) DecodeFrom(d *Decoder) {
	c.decodeHeader(d)
	if uint64(c.GroupsCount)*12 > uint64(d.Remaining()) {
		d.Failf("client lists %d groups, %d bytes left", c.GroupsCount, d.Remaining())
		return
	}
	for i := uint32(0); i < c.GroupsCount; i++ {
		c.Groups = append(c.Groups, ClientGroup{d.U32("stream id"), d.U32("topic id"), d.U32("group id")})
	}
}

// ClientList is the reply of get_clients (22): ClientHeaders back to back.
type ClientList []ClientInfo

func (l *ClientList) AppendTo(b []byte) []byte {
	for i := range *l {
		b = (*l)[i].AppendHeaderTo(b)
	}
	return b
}

func (l *ClientList) DecodeFrom(d *Decoder) {
	*l = ClientList{}
	for d.Remaining() > 0 && d.Err() == nil {
		var c ClientInfo
		c.decodeHeader(d)
		*l = append(*l, c)
	}
}

// CreatePATReply is the payload of create_personal_access_token (42).
type CreatePATReply struct{ Token string }

func (r *CreatePATReply) AppendTo(b []byte) []byte { return appendString8(b, r.Token) }
func (r *CreatePATReply) DecodeFrom(d *Decoder)    { r.Token = d.Name("token") }

// PATInfo is one entry of get_personal_access_tokens (41).
type PATInfo struct {
	Name   string
	Expiry uint64 // µs since the epoch; 0 = never
}

// PATList is the reply of get_personal_access_tokens (41).
type PATList []PATInfo

func (l *PATList) AppendTo(b []byte) []byte {
	for _, p := range *l {
		b = appendU64(appendString8(b, p.Name), p.Expiry)
	}
	return b
}

func (l *PATList) DecodeFrom(d *Decoder) {
	*l = PATList{}
	for d.Remaining() > 0 && d.Err() == nil {
		*l = append(*l, PATInfo{d.Name("token name"), d.U64("token expiry")})
	}
}
