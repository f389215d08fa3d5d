package runtime

// Errors for a missing Iggy permission. The server answers a command its
// user may not run with a bare code (41, Unauthorized); a connector that
// stops on it must say which user, what it tried on which stream or
// topic, and which permission would allow it (the broker's rules, in
// broker/authz.go, which are upstream's).

import (
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/iggy"
)

// iggyAction is what the runtime does on Iggy for a connector.
type iggyAction uint8

const (
	actReadStream iggyAction = iota
	actReadTopic
	actCreateStream
	actCreateTopic
	actConsume
	actSend
)

// explainDenied returns err unchanged unless it is Unauthorized; then it
// names the user, the action on stream (and topic) and the permissions
// that grant it.
func (r *Runtime) explainDenied(err error, act iggyAction, stream, topic string) error {
	if !errors.Is(err, iggy.ErrUnauthorized) {
		return err
	}
	var what, needs string
	switch act {
	case actReadStream:
		what = fmt.Sprintf("read stream %q", stream)
		needs = "read_stream on the stream (or read_streams or manage_streams globally)"
	case actReadTopic:
		what = fmt.Sprintf("read topic %q of stream %q", topic, stream)
		needs = "read_topic on the topic, or read_topics on the stream (or globally)"
	case actCreateStream:
		what = fmt.Sprintf("create stream %q", stream)
		needs = "manage_streams globally (or create the stream as another user)"
	case actCreateTopic:
		what = fmt.Sprintf("create topic %q in stream %q", topic, stream)
		needs = "manage_topics on the stream (or manage_topics or manage_streams globally; or create the topic as another user)"
	case actConsume:
		what = fmt.Sprintf("consume topic %q of stream %q (join its consumer group, poll, store offsets)", topic, stream)
		needs = "read_topic on the topic (it allows polling too), or read_topics on the stream"
	case actSend:
		what = fmt.Sprintf("send messages to topic %q of stream %q", topic, stream)
		needs = "send_messages on the topic or on the stream (or globally)"
	}
	return fmt.Errorf("the Iggy user %s may not %s: it needs %s; an administrator grants it with `ferry user permissions`: %w",
		r.iggyUser(), what, needs, err)
}

// iggyUser names the user the runtime logs in as, for messages.
func (r *Runtime) iggyUser() string {
	ic := r.cfg.Iggy
	switch {
	case ic.Token != "":
		return "(the owner of [iggy] token)"
	case ic.Username != "":
		return fmt.Sprintf("%q", ic.Username)
	}
	return `"iggy"`
}
