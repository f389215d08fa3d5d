package sysevents

// The data of each event type. Names are the broker's at the time of the
// event; ids are the protocol's numeric ids (a stream's or topic's id may
// be reused after a delete, a topic's uid never is).

// StreamData is the data of the stream.* events.
type StreamData struct {
	StreamID uint32 `json:"stream_id"`
	Stream   string `json:"stream"`
	// PreviousName is the name before a rename (stream.updated).
	PreviousName string `json:"previous_name,omitempty"`
	// Topics is how many topics the stream had (purged, deleted).
	Topics int `json:"topics,omitempty"`
}

// TopicData is the data of the topic.* events.
type TopicData struct {
	StreamID     uint32 `json:"stream_id"`
	Stream       string `json:"stream"`
	TopicID      uint32 `json:"topic_id"`
	Topic        string `json:"topic"`
	PreviousName string `json:"previous_name,omitempty"`
	Partitions   int    `json:"partitions"`
	// MessageExpiryMicros and MaxTopicSize are the topic's retention
	// settings after the change; 0 is unlimited.
	MessageExpiryMicros uint64 `json:"message_expiry_us,omitempty"`
	MaxTopicSize        uint64 `json:"max_topic_size,omitempty"`
}

// Retention reasons of a segment.deleted event.
const (
	ReasonExpiry = "message_expiry"
	ReasonSize   = "max_topic_size"
)

// SegmentData is the data of segment.deleted: the segments of one
// partition that one retention pass deleted, oldest first.
type SegmentData struct {
	StreamID  uint32 `json:"stream_id"`
	Stream    string `json:"stream"`
	TopicID   uint32 `json:"topic_id"`
	Topic     string `json:"topic"`
	Partition uint32 `json:"partition"`
	// FirstOffset and LastOffset bound the offsets deleted (inclusive).
	FirstOffset uint64 `json:"first_offset"`
	LastOffset  uint64 `json:"last_offset"`
	Segments    int    `json:"segments"`
	Messages    uint64 `json:"messages"`
	Bytes       uint64 `json:"bytes"`
	// Reason is ReasonExpiry or ReasonSize.
	Reason string `json:"reason"`
}

// Reasons of group.left and group.rebalanced.
const (
	ReasonJoined       = "joined"
	ReasonLeft         = "left"         // leave_consumer_group
	ReasonDisconnected = "disconnected" // logout, closed connection or stale eviction
	ReasonSettled      = "revocation_settled"
	ReasonRepartition  = "partitions_changed"
)

// GroupMember is one member's partitions in a GroupData assignment.
type GroupMember struct {
	MemberID   uint32   `json:"member_id"`
	ClientID   uint32   `json:"client_id"`
	Partitions []uint32 `json:"partitions"`
}

// GroupData is the data of the group.* events.
type GroupData struct {
	StreamID uint32 `json:"stream_id"`
	Stream   string `json:"stream"`
	TopicID  uint32 `json:"topic_id"`
	Topic    string `json:"topic"`
	GroupID  uint32 `json:"group_id"`
	Group    string `json:"group"`
	// MemberID and ClientID name the member that joined or left (0 and
	// omitted for a rebalance not caused by one member).
	MemberID   uint32 `json:"member_id,omitempty"`
	ClientID   uint32 `json:"client_id,omitempty"`
	Generation uint64 `json:"generation"`
	Members    int    `json:"members"`
	Reason     string `json:"reason,omitempty"`
	// Assignment is the partitions each member owns after a rebalance
	// (pending revocations count as the old owner's), in join order.
	Assignment []GroupMember `json:"assignment,omitempty"`
}

// Consumer kinds of OffsetData.
const (
	ConsumerSingle = "consumer"
	ConsumerGroup  = "group"
)

// OffsetData is the data of offset.stored.
type OffsetData struct {
	StreamID  uint32 `json:"stream_id"`
	Stream    string `json:"stream"`
	TopicID   uint32 `json:"topic_id"`
	Topic     string `json:"topic"`
	Partition uint32 `json:"partition"`
	// ConsumerKind is ConsumerSingle or ConsumerGroup; ConsumerID the
	// consumer's numeric id (a named consumer's is XXH32 of its name) or
	// the group's id, Group the group's name.
	ConsumerKind string `json:"consumer_kind"`
	ConsumerID   uint32 `json:"consumer_id"`
	Group        string `json:"group,omitempty"`
	// Offset is the last offset stored in the coalescing window; Stores
	// how many stores the event stands for (1 or more).
	Offset uint64 `json:"offset"`
	Stores int    `json:"stores"`
}

// Reasons of client.disconnected.
const (
	ReasonLogout = "logout"
	ReasonClosed = "closed"
)

// ClientData is the data of client.connected and client.disconnected.
type ClientData struct {
	// ClientID is the connection's client id, as get_clients reports it.
	ClientID uint32 `json:"client_id"`
	Address  string `json:"address"`
	UserID   uint32 `json:"user_id"`
	Reason   string `json:"reason,omitempty"`
}

// Login methods of LoginData.
const (
	LoginPassword = "password"
	LoginToken    = "token"
)

// LoginData is the data of login.failed. It never holds the password or
// token; Username is the name a password login gave (a token login has
// none).
type LoginData struct {
	ClientID uint32 `json:"client_id"`
	Address  string `json:"address"`
	Method   string `json:"method"`
	Username string `json:"username,omitempty"`
	// Reason is the eviction the broker answered (InvalidCredentials,
	// InvalidToken, UserInactive, ...).
	Reason string `json:"reason"`
}

// ConnectorStatusData is the data of connector.status_changed.
type ConnectorStatusData struct {
	// Kind is "source" or "sink"; Key the connector's key.
	Kind string `json:"kind"`
	Key  string `json:"key"`
	From string `json:"from"`
	To   string `json:"to"`
	// Error is the connector's last error when To is "Error" (cut to
	// 1000 bytes).
	Error string `json:"error,omitempty"`
}

// DeadLetterData is the data of message.dead_lettered: one message the
// runtime sent to a dead-letter topic.
type DeadLetterData struct {
	Connector string `json:"connector"`
	// Kind is "sink" (a message read from Stream/Topic at Partition and
	// Offset) or "source" (a message polled for Stream/Topic, at
	// SourceIndex of its batch).
	Kind        string  `json:"kind"`
	Stream      string  `json:"stream,omitempty"`
	Topic       string  `json:"topic,omitempty"`
	Partition   *uint32 `json:"partition,omitempty"`
	Offset      *uint64 `json:"offset,omitempty"`
	SourceIndex *uint32 `json:"source_index,omitempty"`
	MessageID   string  `json:"message_id"`
	// DeadLetterStream and DeadLetterTopic are where it went.
	DeadLetterStream string `json:"dead_letter_stream"`
	DeadLetterTopic  string `json:"dead_letter_topic"`
	Error            string `json:"error,omitempty"`
}
