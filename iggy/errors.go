package iggy

import (
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Error is an error the server reported for one command: a reply status,
// a committed rejection in a result section, an empty "not found" reply,
// or an eviction. It unwraps to the wire sentinel of its code (or to a
// *wire.EvictionError, which unwraps to that sentinel), so
//
//	errors.Is(err, iggy.ErrTopicNotFound)
//
// works whichever way the server said it.
type Error struct {
	// Command is the command that failed.
	Command wire.Command
	// Code is the Iggy error code.
	Code wire.Code
	// Err is the *wire.Error for Code, or a *wire.EvictionError.
	Err error
}

func newError(cmd wire.Command, code wire.Code) *Error {
	return &Error{Command: cmd, Code: code, Err: wire.ErrorFor(code)}
}

func (e *Error) Error() string {
	var ev *wire.EvictionError
	if errors.As(e.Err, &ev) && ev.Reason == wire.EvictIncompatibleProtocol {
		return fmt.Sprintf("iggy: %s: incompatible protocol: the server accepts %s..%s (iggy error %d)",
			e.Command, wire.FormatVersion(ev.Min), wire.FormatVersion(ev.Max), e.Code)
	}
	return fmt.Sprintf("iggy: %s: %v", e.Command, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Retriable reports whether sending the same request again may succeed.
func (e *Error) Retriable() bool {
	var w *wire.Error
	return errors.As(e.Err, &w) && w.Retriable
}

// ErrConnection is matched (errors.Is) by every *NetError: the call failed
// because the connection failed, not because the server said no.
var ErrConnection = errors.New("iggy: connection failed")

// NetError is a failure of the connection under a call: a dial, read or
// write error, a reply that desynchronised the lockstep protocol, or a
// context that ended mid-request (the connection is then dropped, since
// the late reply would be read as the next one's). errors.Is(err,
// ErrConnection) is true for it, and it unwraps to the cause (a net.Error,
// context.DeadlineExceeded, ...).
type NetError struct {
	// Op is the command or step that failed ("dial", "send_messages", ...).
	Op string
	// Addr is the server address.
	Addr string
	// Err is the cause.
	Err error
}

func (e *NetError) Error() string { return fmt.Sprintf("iggy: %s %s: %v", e.Op, e.Addr, e.Err) }

func (e *NetError) Unwrap() error { return e.Err }

// Is makes every NetError match ErrConnection.
func (e *NetError) Is(target error) bool { return target == ErrConnection }

// Client-side errors.
var (
	// ErrClosed is returned by calls on a closed Client, Producer or
	// GroupConsumer.
	ErrClosed = errors.New("iggy: closed")
	// ErrNotLoggedIn is returned locally for a command that needs a
	// session when the client has no credentials; it matches
	// ErrUnauthenticated too.
	ErrNotLoggedIn = fmt.Errorf("iggy: no credentials given, cannot run this command: %w", wire.ErrUnauthenticated)
)

// The Iggy error codes callers most often test for, re-exported from
// package wire. The *NotFound sentinels match both the by-id and by-name
// codes. Use errors.Is.
var (
	ErrStreamNotFound                 = wire.ErrStreamNotFound
	ErrTopicNotFound                  = wire.ErrTopicNotFound
	ErrPartitionNotFound              = wire.ErrPartitionNotFound
	ErrConsumerGroupNotFound          = wire.ErrConsumerGroupNotFound
	ErrConsumerOffsetNotFound         = wire.ErrConsumerOffsetNotFound
	ErrResourceNotFound               = wire.ErrResourceNotFound
	ErrStreamNameAlreadyExists        = wire.ErrStreamNameAlreadyExists
	ErrTopicNameAlreadyExists         = wire.ErrTopicNameAlreadyExists
	ErrConsumerGroupNameAlreadyExists = wire.ErrConsumerGroupNameAlreadyExists
	ErrConsumerGroupMemberNotFound    = wire.ErrConsumerGroupMemberNotFound
	ErrConsumerGroupPartitionNotOwned = wire.ErrConsumerGroupPartitionNotOwned
	ErrInvalidCredentials             = wire.ErrInvalidCredentials
	ErrInvalidPAT                     = wire.ErrInvalidPAT
	ErrPATAlreadyExists               = wire.ErrPATAlreadyExists
	ErrUnauthenticated                = wire.ErrUnauthenticated
	ErrUnauthorized                   = wire.ErrUnauthorized
	ErrStaleClient                    = wire.ErrStaleClient
	ErrIncompatibleProtocol           = wire.ErrIncompatibleProtocolVersion
	ErrInvalidCommand                 = wire.ErrInvalidCommand
	ErrInvalidFormat                  = wire.ErrInvalidFormat
	ErrFeatureUnavailable             = wire.ErrFeatureUnavailable
	ErrInvalidOffset                  = wire.ErrInvalidOffset
	ErrInvalidPartitionsCount         = wire.ErrInvalidPartitionsCount
	ErrTooManyPartitions              = wire.ErrTooManyPartitions
	ErrInvalidTopicSize               = wire.ErrInvalidTopicSize
	ErrUnsupportedOptionKey           = wire.ErrUnsupportedOptionKey
	ErrInvalidOptionValue             = wire.ErrInvalidOptionValue
	ErrEmptyMessagePayload            = wire.ErrEmptyMessagePayload
	ErrTooBigMessagePayload           = wire.ErrTooBigMessagePayload
	ErrTooBigUserHeaders              = wire.ErrTooBigUserHeaders
	ErrInvalidMessagesCount           = wire.ErrInvalidMessagesCount
)

// IsRetriable reports whether err may go away if the call is made again:
// a connection failure (the client reconnects) or a retriable Iggy code
// (stale client, not a member, partition not owned, transient).
func IsRetriable(err error) bool {
	if errors.Is(err, ErrConnection) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Retriable()
	}
	var w *wire.Error
	return errors.As(err, &w) && w.Retriable
}

// permanentLogin reports whether a login failure must not be retried:
// bad credentials or token, an inactive user, a protocol mismatch or a
// malformed login.
func permanentLogin(err error) bool {
	var ev *wire.EvictionError
	if errors.As(err, &ev) {
		switch ev.Reason {
		case wire.EvictInvalidCredentials, wire.EvictInvalidToken, wire.EvictUserInactive,
			wire.EvictIncompatibleProtocol, wire.EvictMalformedLogin:
			return true
		}
		return false
	}
	return errors.Is(err, errConfig) || errors.Is(err, ErrInvalidCredentials) ||
		errors.Is(err, ErrInvalidPAT) || errors.Is(err, ErrIncompatibleProtocol)
}
