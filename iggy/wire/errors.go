package wire

import (
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every decoding error: the bytes do not follow
// the protocol layout. It is not an Iggy code; a server answers such bodies
// with ErrInvalidCommand (status 3) as the upstream server does.
var ErrMalformed = errors.New("malformed payload")

// Code is an Iggy error code, as carried in a reply status, a result
// section entry, or derived from an eviction reason.
type Code uint32

// Error is one Iggy error code with its upstream name. The package keeps
// one *Error per known code, so errors.Is(err, wire.ErrTopicIDNotFound)
// matches any error that wraps the code 2010. Codes that mean the same thing
// for a caller (a stream missing by id or by name) also match each other's
// sentinels; see Is.
type Error struct {
	Code Code
	// Name is the upstream name of the code, such as "TopicIdNotFound".
	Name string
	// Text says what happened, in words a user can act on.
	Text string
	// Retriable reports whether sending the same request again may succeed.
	Retriable bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (iggy error %d, %s)", e.Text, e.Code, e.Name)
}

// Is reports whether target is an *Error with the same code, or a code of the
// same family: stream, topic and consumer group not found by id or by name.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code || (family(t.Code) != 0 && family(t.Code) == family(e.Code))
}

func family(c Code) int {
	switch c {
	case 1009, 1010:
		return 1
	case 2010, 2011:
		return 2
	case 5000, 5003:
		return 3
	}
	return 0
}

var byCode = map[Code]*Error{}

func def(code Code, name, text string, retriable bool) *Error {
	e := &Error{Code: code, Name: name, Text: text, Retriable: retriable}
	if _, dup := byCode[code]; dup {
		panic(fmt.Sprintf("wire: error code %d defined twice", code))
	}
	byCode[code] = e
	return e
}

// ErrorFor returns the sentinel for code, or a new *Error named "Unknown"
// for a code this package does not know. It never returns nil for a
// non-zero code; for 0 it returns nil.
func ErrorFor(code Code) *Error {
	if code == 0 {
		return nil
	}
	if e, ok := byCode[code]; ok {
		return e
	}
	return &Error{Code: code, Name: "Unknown", Text: fmt.Sprintf("unknown iggy error code %d", code)}
}

// The Iggy error codes a client or server of protocol 0.11 meets. Names
// follow upstream's; the text is Ferry's own.
var (
	ErrError                          = def(1, "Error", "the server reported an unspecified error", false)
	ErrInvalidConfiguration           = def(2, "InvalidConfiguration", "invalid configuration", false)
	ErrInvalidCommand                 = def(3, "InvalidCommand", "invalid command or undecodable request", false)
	ErrInvalidFormat                  = def(4, "InvalidFormat", "invalid request format", false)
	ErrFeatureUnavailable             = def(5, "FeatureUnavailable", "feature is unavailable", false)
	ErrInvalidIdentifier              = def(6, "InvalidIdentifier", "invalid identifier", false)
	ErrDisconnected                   = def(8, "Disconnected", "disconnected", true)
	ErrCannotEstablishConnection      = def(9, "CannotEstablishConnection", "cannot establish a connection", true)
	ErrResourceNotFound               = def(20, "ResourceNotFound", "resource not found", false)
	ErrStaleClient                    = def(30, "StaleClient", "the server evicted this client as stale", true)
	ErrUnauthenticated                = def(40, "Unauthenticated", "not logged in", false)
	ErrUnauthorized                   = def(41, "Unauthorized", "not allowed", false)
	ErrInvalidCredentials             = def(42, "InvalidCredentials", "invalid username or password", false)
	ErrInvalidUsername                = def(43, "InvalidUsername", "invalid username", false)
	ErrInvalidPassword                = def(44, "InvalidPassword", "invalid password", false)
	ErrInvalidUserStatus              = def(45, "InvalidUserStatus", "invalid user status", false)
	ErrUserAlreadyExists              = def(46, "UserAlreadyExists", "user already exists", false)
	ErrUserInactive                   = def(47, "UserInactive", "user is inactive", false)
	ErrCannotDeleteUser               = def(48, "CannotDeleteUser", "cannot delete this user", false)
	ErrCannotChangePermissions        = def(49, "CannotChangePermissions", "cannot change this user's permissions", false)
	ErrInvalidPATName                 = def(50, "InvalidPersonalAccessTokenName", "invalid personal access token name", false)
	ErrPATAlreadyExists               = def(51, "PersonalAccessTokenAlreadyExists", "a personal access token with this name already exists", false)
	ErrPATLimitReached                = def(52, "PersonalAccessTokensLimitReached", "personal access token limit reached", false)
	ErrInvalidPAT                     = def(53, "InvalidPersonalAccessToken", "invalid or expired personal access token", false)
	ErrPATExpired                     = def(54, "PersonalAccessTokenExpired", "personal access token has expired", false)
	ErrInvalidPATExpiry               = def(56, "InvalidPersonalAccessTokenExpiry", "invalid personal access token expiry", false)
	ErrTransientNotCommitted          = def(57, "TransientNotCommitted", "request not committed yet; replay it", true)
	ErrTransientNotAccepted           = def(58, "TransientNotAccepted", "request not accepted yet; replay it", true)
	ErrRequestAlreadyApplied          = def(59, "RequestAlreadyApplied", "request already applied; its reply is gone", false)
	ErrNotConnected                   = def(61, "NotConnected", "not connected", true)
	ErrClientShutdown                 = def(63, "ClientShutdown", "client is closed", false)
	ErrInvalidTLSDomain               = def(64, "InvalidTlsDomain", "invalid TLS domain", false)
	ErrInvalidTLSCertificatePath      = def(65, "InvalidTlsCertificatePath", "invalid TLS certificate path", false)
	ErrInvalidTLSCertificate          = def(66, "InvalidTlsCertificate", "invalid TLS certificate", false)
	ErrClientNotFound                 = def(100, "ClientNotFound", "client not found", false)
	ErrConnectionClosed               = def(206, "ConnectionClosed", "connection closed", true)
	ErrStreamIDNotFound               = def(1009, "StreamIdNotFound", "stream not found", false)
	ErrStreamNameNotFound             = def(1010, "StreamNameNotFound", "stream not found by name", false)
	ErrStreamNameAlreadyExists        = def(1012, "StreamNameAlreadyExists", "a stream with this name already exists", false)
	ErrInvalidStreamName              = def(1013, "InvalidStreamName", "invalid stream name", false)
	ErrInvalidStreamID                = def(1014, "InvalidStreamId", "invalid stream id", false)
	ErrInvalidTopicSize               = def(1019, "InvalidTopicSize", "max topic size is below the segment size", false)
	ErrTooManyStreams                 = def(1020, "TooManyStreams", "too many streams", false)
	ErrTopicIDNotFound                = def(2010, "TopicIdNotFound", "topic not found", false)
	ErrTopicNameNotFound              = def(2011, "TopicNameNotFound", "topic not found by name", false)
	ErrTopicNameAlreadyExists         = def(2013, "TopicNameAlreadyExists", "a topic with this name already exists in the stream", false)
	ErrInvalidTopicName               = def(2014, "InvalidTopicName", "invalid topic name", false)
	ErrTooManyPartitions              = def(2015, "TooManyPartitions", "too many partitions", false)
	ErrInvalidTopicID                 = def(2016, "InvalidTopicId", "invalid topic id", false)
	ErrInvalidPartitionsCount         = def(2019, "InvalidPartitionsCount", "invalid partitions count", false)
	ErrTooManyTopics                  = def(2021, "TooManyTopics", "too many topics", false)
	ErrPartitionNotFound              = def(3007, "PartitionNotFound", "partition not found", false)
	ErrNoPartitions                   = def(3008, "NoPartitions", "topic has no partitions", false)
	ErrPartitionIDSpaceExhausted      = def(3013, "PartitionIdSpaceExhausted", "partition id space exhausted", false)
	ErrConsumerOffsetNotFound         = def(3021, "ConsumerOffsetNotFound", "no offset stored for this consumer", false)
	ErrSegmentNotFound                = def(4000, "SegmentNotFound", "segment not found", false)
	ErrInvalidSegmentSize             = def(4002, "InvalidSegmentSize", "invalid segment size", false)
	ErrCannotSaveMessagesToSegment    = def(4006, "CannotSaveMessagesToSegment", "the server could not store the messages: its disk is full or failing", false)
	ErrInvalidMessagesCount           = def(4009, "InvalidMessagesCount", "invalid messages count", false)
	ErrTooBigUserHeaders              = def(4017, "TooBigUserHeaders", "user headers are too big", false)
	ErrInvalidHeaderKey               = def(4018, "InvalidHeaderKey", "invalid header key", false)
	ErrInvalidHeaderValue             = def(4019, "InvalidHeaderValue", "invalid header value", false)
	ErrTooBigMessagePayload           = def(4022, "TooBigMessagePayload", "message payload is too big", false)
	ErrTooManyMessages                = def(4023, "TooManyMessages", "too many messages", false)
	ErrEmptyMessagePayload            = def(4024, "EmptyMessagePayload", "message payload is empty", false)
	ErrInvalidMessagePayloadLength    = def(4025, "InvalidMessagePayloadLength", "invalid message payload length", false)
	ErrInvalidMessageChecksum         = def(4027, "InvalidMessageChecksum", "message checksum does not match", false)
	ErrInvalidKeyValueLength          = def(4028, "InvalidKeyValueLength", "invalid key or value length", false)
	ErrInvalidMessageTimestampDelta   = def(4038, "InvalidMessageTimestampDelta", "message timestamp delta exceeds the batch limit", false)
	ErrInvalidBatchChecksum           = def(4039, "InvalidBatchChecksum", "batch checksum does not match", false)
	ErrInvalidHeaderKind              = def(4040, "InvalidHeaderKind", "invalid header kind", false)
	ErrUnsupportedOptionKey           = def(4041, "UnsupportedOptionKey", "unsupported option key", false)
	ErrInvalidOptionValue             = def(4042, "InvalidOptionValue", "invalid option value", false)
	ErrOptionsBlockTooLarge           = def(4043, "OptionsBlockTooLarge", "options block exceeds its limits", false)
	ErrProducerClosed                 = def(4057, "ProducerClosed", "producer is closed", false)
	ErrInvalidOffset                  = def(4100, "InvalidOffset", "invalid offset", false)
	ErrInvalidReservedField           = def(4101, "InvalidReservedField", "reserved field is not zero", false)
	ErrConsumerGroupIDNotFound        = def(5000, "ConsumerGroupIdNotFound", "consumer group not found", false)
	ErrInvalidConsumerGroupID         = def(5002, "InvalidConsumerGroupId", "invalid consumer group id", false)
	ErrConsumerGroupNameNotFound      = def(5003, "ConsumerGroupNameNotFound", "consumer group not found by name", false)
	ErrConsumerGroupNameAlreadyExists = def(5004, "ConsumerGroupNameAlreadyExists", "a consumer group with this name already exists", false)
	ErrInvalidConsumerGroupName       = def(5005, "InvalidConsumerGroupName", "invalid consumer group name", false)
	ErrConsumerGroupMemberNotFound    = def(5006, "ConsumerGroupMemberNotFound", "this client is not a member of the consumer group", true)
	ErrConsumerGroupPartitionNotOwned = def(5009, "ConsumerGroupPartitionNotOwned", "partition is not owned by this group member", true)
	ErrInvalidConnectionString        = def(8000, "InvalidConnectionString", "invalid connection string", false)
	ErrSnapshotFileCompletionFailed   = def(9000, "SnapshotFileCompletionFailed", "snapshot failed", true)
	ErrCannotSerializeResource        = def(10000, "CannotSerializeResource", "cannot serialize resource", false)
	ErrCannotDeserializeResource      = def(10001, "CannotDeserializeResource", "cannot deserialize resource", false)
	ErrCannotWriteToFile              = def(10006, "CannotWriteToFile", "the server could not write its data files: its disk is full or failing", false)
	ErrAlreadyAuthenticated           = def(14000, "AlreadyAuthenticated", "session already bound", false)
	ErrInvalidSession                 = def(14001, "InvalidSession", "invalid session value", false)
	ErrIncompatibleProtocolVersion    = def(14003, "IncompatibleProtocolVersion", "incompatible protocol version", false)
)

// Family sentinels: each matches both the by-id and the by-name code.
var (
	ErrStreamNotFound        = ErrStreamIDNotFound
	ErrTopicNotFound         = ErrTopicIDNotFound
	ErrConsumerGroupNotFound = ErrConsumerGroupIDNotFound
)
