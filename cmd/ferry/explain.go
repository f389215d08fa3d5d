package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/iggy"
)

// explainMissing turns a "not found" answer to a command on stream/topic
// (and partition, when not negative) into an error that names what is
// missing and how to see what exists: the server's answer says only which
// kind of thing it did not find, and sometimes the wrong kind (a topic
// lookup in a stream that does not exist answers "topic not found").
// Other errors are returned as they are.
func explainMissing(ctx context.Context, cl *iggy.Client, stream, topic string, partition int64, err error) error {
	notFound := errors.Is(err, iggy.ErrStreamNotFound) || errors.Is(err, iggy.ErrTopicNotFound) ||
		errors.Is(err, iggy.ErrPartitionNotFound) || errors.Is(err, iggy.ErrResourceNotFound)
	if !notFound {
		return err
	}
	if _, serr := cl.GetStream(ctx, iggy.ParseID(stream)); errors.Is(serr, iggy.ErrStreamNotFound) {
		return fmt.Errorf("stream %q not found on %s (`ferry stream list` shows the streams, `ferry stream create %s` creates it): %w",
			stream, cl.Addr(), stream, err)
	}
	t, terr := cl.GetTopic(ctx, iggy.ParseID(stream), iggy.ParseID(topic))
	if errors.Is(terr, iggy.ErrTopicNotFound) {
		return fmt.Errorf("topic %q not found in stream %q (`ferry topic list %s` shows its topics, `ferry topic create %s %s 1 none` creates it): %w",
			topic, stream, stream, stream, topic, err)
	}
	if terr == nil && partition >= 0 && uint64(partition) >= uint64(t.PartitionsCount) {
		return fmt.Errorf("partition %d not found: topic %s/%s has %d partition(s), numbered 0 to %d: %w",
			partition, stream, topic, t.PartitionsCount, int(t.PartitionsCount)-1, err)
	}
	return err
}

// explainDial names the server and the fix for the failures of logging
// in that users meet first: nothing listening, a wrong password.
func explainDial(address, username string, err error) error {
	var ne *iggy.NetError
	switch {
	case errors.Is(err, iggy.ErrInvalidCredentials):
		return fmt.Errorf("the Iggy server at %s refused the login of %q: wrong username or password (--username and --password, or $IGGY_USERNAME and $IGGY_PASSWORD): %w",
			address, username, err)
	case errors.As(err, &ne):
		return fmt.Errorf("cannot reach an Iggy server at %s (is `ferry run` or `ferry serve` running there? --address or $IGGY_ADDRESS names another): %w",
			address, err)
	}
	return err
}

// explainDenied names the user and where rights come from when the
// server refused a command with Unauthorized (its answer is a bare code).
func explainDenied(who string, err error) error {
	var ie *iggy.Error
	if !errors.Is(err, iggy.ErrUnauthorized) || !errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s may not run %s on this server: `ferry user get` shows the user's permissions, and a user who may manage users grants more with `ferry user permissions`: %w",
		who, ie.Command, err)
}
