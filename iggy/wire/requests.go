package wire

// Request payloads. Each type documents the commands that use it; AppendTo
// encodes it and DecodeFrom reads it. A server decodes them with
// DecodeRequest, which ignores bytes after the last field as upstream does;
// Unmarshal requires that the whole body is consumed.

// StreamRef is the body of get_stream (200), delete_stream (203),
// purge_stream (205) and get_topics (301).
type StreamRef struct{ Stream Identifier }

func (r *StreamRef) AppendTo(b []byte) []byte { return r.Stream.AppendTo(b) }
func (r *StreamRef) DecodeFrom(d *Decoder)    { r.Stream = d.Identifier("stream id") }

// TopicRef is the body of get_topic (300), delete_topic (303),
// purge_topic (305) and get_consumer_groups (601).
type TopicRef struct{ Stream, Topic Identifier }

func (r *TopicRef) AppendTo(b []byte) []byte { return r.Topic.AppendTo(r.Stream.AppendTo(b)) }
func (r *TopicRef) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
}

// GroupRef is the body of get (600), delete (603), join (604), leave (605)
// and sync (606) consumer group.
type GroupRef struct{ Stream, Topic, Group Identifier }

func (r *GroupRef) AppendTo(b []byte) []byte {
	return r.Group.AppendTo(r.Topic.AppendTo(r.Stream.AppendTo(b)))
}
func (r *GroupRef) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Group = d.Identifier("group id")
}

// CreateStream is the body of create_stream (202). Options is an encoded
// TLV block running to the end of the body.
type CreateStream struct {
	Name    string
	Options []byte
}

func (r *CreateStream) AppendTo(b []byte) []byte {
	return append(appendString8(b, r.Name), r.Options...)
}
func (r *CreateStream) DecodeFrom(d *Decoder) {
	r.Name = d.Name("stream name")
	r.Options = d.Rest()
}

// UpdateStream is the body of update_stream (204).
type UpdateStream struct {
	Stream  Identifier
	Name    string
	Options []byte
}

func (r *UpdateStream) AppendTo(b []byte) []byte {
	return append(appendString8(r.Stream.AppendTo(b), r.Name), r.Options...)
}
func (r *UpdateStream) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Name = d.Name("stream name")
	r.Options = d.Rest()
}

// CreateTopic is the body of create_topic (302).
type CreateTopic struct {
	Stream          Identifier
	PartitionsCount uint32
	Name            string
	Options         []byte
}

func (r *CreateTopic) AppendTo(b []byte) []byte {
	b = appendU32(r.Stream.AppendTo(b), r.PartitionsCount)
	return append(appendString8(b, r.Name), r.Options...)
}
func (r *CreateTopic) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.PartitionsCount = d.U32("partitions count")
	r.Name = d.Name("topic name")
	r.Options = d.Rest()
}

// UpdateTopic is the body of update_topic (304).
type UpdateTopic struct {
	Stream, Topic Identifier
	Name          string
	Options       []byte
}

func (r *UpdateTopic) AppendTo(b []byte) []byte {
	b = r.Topic.AppendTo(r.Stream.AppendTo(b))
	return append(appendString8(b, r.Name), r.Options...)
}
func (r *UpdateTopic) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Name = d.Name("topic name")
	r.Options = d.Rest()
}

// PartitionsChange is the body of create_partitions (402) and
// delete_partitions (403).
type PartitionsChange struct {
	Stream, Topic Identifier
	Count         uint32
}

func (r *PartitionsChange) AppendTo(b []byte) []byte {
	return appendU32(r.Topic.AppendTo(r.Stream.AppendTo(b)), r.Count)
}
func (r *PartitionsChange) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Count = d.U32("partitions count")
}

// DeleteSegments is the body of delete_segments (503).
type DeleteSegments struct {
	Stream, Topic Identifier
	Partition     uint32
	Count         uint32
}

func (r *DeleteSegments) AppendTo(b []byte) []byte {
	b = appendU32(r.Topic.AppendTo(r.Stream.AppendTo(b)), r.Partition)
	return appendU32(b, r.Count)
}
func (r *DeleteSegments) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Partition = d.U32("partition id")
	r.Count = d.U32("segments count")
}

// CreateConsumerGroup is the body of create_consumer_group (602).
type CreateConsumerGroup struct {
	Stream, Topic Identifier
	Name          string
}

func (r *CreateConsumerGroup) AppendTo(b []byte) []byte {
	return appendString8(r.Topic.AppendTo(r.Stream.AppendTo(b)), r.Name)
}
func (r *CreateConsumerGroup) DecodeFrom(d *Decoder) {
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Name = d.Name("group name")
}

// PollMessages is the body of poll_messages (100).
type PollMessages struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptPartition
	Strategy      PollingStrategy
	Count         uint32
	AutoCommit    bool
}

func (r *PollMessages) AppendTo(b []byte) []byte {
	b = r.Consumer.AppendTo(b)
	b = r.Topic.AppendTo(r.Stream.AppendTo(b))
	b = r.Strategy.AppendTo(r.Partition.AppendTo(b))
	return appendBool(appendU32(b, r.Count), r.AutoCommit)
}
func (r *PollMessages) DecodeFrom(d *Decoder) {
	r.Consumer = d.Consumer("consumer")
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Partition = d.OptPartition("partition")
	r.Strategy = d.PollingStrategy("polling strategy")
	r.Count = d.U32("count")
	r.AutoCommit = d.U8("auto commit") == 1
}

// SendMessages is the body of send_messages (101):
// [metadata_len u32][stream][topic][partitioning][count u32][batch].
// Batch aliases the body; DecodeFrom checks the framing, and a
// BatchChecker checks the batch itself.
type SendMessages struct {
	Stream, Topic Identifier
	Partitioning  Partitioning
	Count         uint32
	Batch         []byte
}

// AppendSendMessages appends a send_messages body for msgs, building the
// batch (see AppendBatch).
func AppendSendMessages(b []byte, stream, topic Identifier, p Partitioning, msgs []Message) ([]byte, error) {
	at := len(b)
	b = appendU32(b, 0)
	b = p.AppendTo(topic.AppendTo(stream.AppendTo(b)))
	b = appendU32(b, uint32(len(msgs)))
	putU32(b[at:], uint32(len(b)-at-4))
	return AppendBatch(b, msgs)
}

func (r *SendMessages) AppendTo(b []byte) []byte {
	at := len(b)
	b = appendU32(b, 0)
	b = r.Partitioning.AppendTo(r.Topic.AppendTo(r.Stream.AppendTo(b)))
	b = appendU32(b, r.Count)
	putU32(b[at:], uint32(len(b)-at-4))
	return append(b, r.Batch...)
}

func (r *SendMessages) DecodeFrom(d *Decoder) {
	metaLen := d.U32("metadata length")
	start := d.Offset()
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Partitioning = d.Partitioning("partitioning")
	r.Count = d.U32("messages count")
	if d.Err() == nil && uint64(d.Offset()-start) != uint64(metaLen) {
		d.Failf("metadata length is %d, the fields take %d", metaLen, d.Offset()-start)
	}
	r.Batch = d.Rest()
	if d.Err() == nil {
		if len(r.Batch) < BatchHeaderSize {
			d.Failf("batch is %d bytes, want at least %d", len(r.Batch), BatchHeaderSize)
		} else if h, _ := DecodeBatchHeader(r.Batch); h.Count != r.Count || r.Count == 0 {
			d.Failf("messages count %d, batch header count %d", r.Count, h.Count)
		}
	}
}

// ConsumerOffsetRef is the body of get_consumer_offset (120).
type ConsumerOffsetRef struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptPartition
}

func (r *ConsumerOffsetRef) AppendTo(b []byte) []byte {
	b = r.Topic.AppendTo(r.Stream.AppendTo(r.Consumer.AppendTo(b)))
	return r.Partition.AppendTo(b)
}
func (r *ConsumerOffsetRef) DecodeFrom(d *Decoder) {
	r.Consumer = d.Consumer("consumer")
	r.Stream = d.Identifier("stream id")
	r.Topic = d.Identifier("topic id")
	r.Partition = d.OptPartition("partition")
}

// StoreConsumerOffset is the body of store_consumer_offset (121).
type StoreConsumerOffset struct {
	ConsumerOffsetRef
	Offset uint64
	Ack    AckLevel
}

func (r *StoreConsumerOffset) AppendTo(b []byte) []byte {
	return append(appendU64(r.ConsumerOffsetRef.AppendTo(b), r.Offset), byte(r.Ack))
}
func (r *StoreConsumerOffset) DecodeFrom(d *Decoder) {
	r.ConsumerOffsetRef.DecodeFrom(d)
	r.Offset = d.U64("offset")
	r.Ack = d.AckLevel("ack level")
}

// DeleteConsumerOffset is the body of delete_consumer_offset (122).
type DeleteConsumerOffset struct {
	ConsumerOffsetRef
	Ack AckLevel
}

func (r *DeleteConsumerOffset) AppendTo(b []byte) []byte {
	return append(r.ConsumerOffsetRef.AppendTo(b), byte(r.Ack))
}
func (r *DeleteConsumerOffset) DecodeFrom(d *Decoder) {
	r.ConsumerOffsetRef.DecodeFrom(d)
	r.Ack = d.AckLevel("ack level")
}

// OptionScope selects the catalog of describe_options (13).
type OptionScope uint8

// Option scopes.
const (
	ScopeTopic  OptionScope = 1
	ScopeStream OptionScope = 2
	ScopeUser   OptionScope = 3
)

// DescribeOptions is the body of describe_options (13).
type DescribeOptions struct{ Scope OptionScope }

func (r *DescribeOptions) AppendTo(b []byte) []byte { return append(b, byte(r.Scope)) }
func (r *DescribeOptions) DecodeFrom(d *Decoder)    { r.Scope = OptionScope(d.U8("scope")) }

// GetClient is the body of get_client (21).
type GetClient struct{ ClientID uint32 }

func (r *GetClient) AppendTo(b []byte) []byte { return appendU32(b, r.ClientID) }
func (r *GetClient) DecodeFrom(d *Decoder)    { r.ClientID = d.U32("client id") }

// CreatePAT is the body of create_personal_access_token (42). Expiry is
// in µs; 0 means the token never expires.
type CreatePAT struct {
	Name   string
	Expiry uint64
}

func (r *CreatePAT) AppendTo(b []byte) []byte { return appendU64(appendString8(b, r.Name), r.Expiry) }
func (r *CreatePAT) DecodeFrom(d *Decoder) {
	r.Name = d.Name("token name")
	r.Expiry = d.U64("token expiry")
}

// DeletePAT is the body of delete_personal_access_token (43).
type DeletePAT struct{ Name string }

func (r *DeletePAT) AppendTo(b []byte) []byte { return appendString8(b, r.Name) }
func (r *DeletePAT) DecodeFrom(d *Decoder)    { r.Name = d.Name("token name") }

// GetSnapshot is the body of get_snapshot (11).
type GetSnapshot struct {
	Compression uint8
	Types       []uint8
}

func (r *GetSnapshot) AppendTo(b []byte) []byte {
	b = append(b, r.Compression, byte(len(r.Types)))
	return append(b, r.Types...)
}
func (r *GetSnapshot) DecodeFrom(d *Decoder) {
	r.Compression = d.U8("compression")
	r.Types = d.Bytes(int(d.U8("types count")), "snapshot types")
}
