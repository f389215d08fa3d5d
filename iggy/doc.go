// Package iggy is Ferry's Go client for Apache Iggy's binary protocol 0.11
// over TCP or TLS. It owns the connection (lockstep request/reply, the VSR
// session rules, heartbeats, reconnects), the typed admin and message
// calls, a batching Producer with per-send acknowledgements, and a
// GroupConsumer that commits offsets only when told to. The byte layouts
// live in package iggy/wire; the common types are re-exported here, so most
// programs import only this package.
//
// # Connecting
//
// Dial takes "host:port" or a connection string:
//
//	iggy://user:password@host:port          log in with a password
//	iggy+tls://user:password@host:port      the same over TLS
//	iggy://TOKEN@host:port                  log in with a personal access token
//	iggy://:TOKEN@host:port                 the same
//	iggy://host:port?pat=TOKEN              the same
//
// The port defaults to 8090. Query options: tls=true, tls_ca_file=PATH,
// tls_domain=NAME, heartbeat_interval, reconnection_interval (the first
// backoff), reconnection_max_interval, reconnection_retries (a count or
// "unlimited"), request_timeout. Durations are written "5s", "1m 30s".
// Special characters in a user, password or token are %-escaped. Options
// passed to Dial override the connection string. Credentials never appear
// in logs, errors or String.
//
// # Errors
//
// A server rejection is an *Error carrying the command and the Iggy code;
// it unwraps to the code's sentinel, re-exported here (ErrStreamNotFound,
// ErrInvalidCredentials, ...). A connection failure is a *NetError, which
// matches ErrConnection. Get calls answer a missing resource with the
// not-found sentinel of its kind.
//
// # What an acknowledgement promises
//
// A nil Ack.Wait (and a nil SendMessages) means the server appended the
// messages to its partition log: they survive a crash of the server
// process. Whether they also survive a power loss or a kernel crash is
// the server's fsync policy. Ferry's broker (ferry serve, and the
// runtime's embedded broker) defaults to --fsync interval: the log is
// fsynced at least every --fsync-interval (1s), so up to that much
// acknowledged data can be lost when the machine itself goes down.
// --fsync always, or a topic created with enforce_fsync, fsyncs before
// each acknowledgement; with another Iggy server, its own partition fsync
// settings decide.
//
// # Message keys and deletion markers
//
// Iggy stores no key with a message (a send's partitioning key only picks
// the partition), so Ferry carries it in a user header, one convention
// for every part of Ferry: KeyHeader ("key") holds the key, a string
// value for a string key and a raw value for a binary one (the two are
// different keys even when their bytes are equal); Message.Key reads it.
// DeletedHeader ("deleted") set to the bool true marks a deletion marker
// (a tombstone): the key no longer has a value. Iggy refuses an empty
// payload, so a marker carries one anyway, by convention the JSON null
// ("null"). Send a keyed message with the key as its partitioning key
// too (ByKey, or WithMessageKey on a Producer), so that a key's messages
// stay in one partition, in order. docs/keys.md lists who writes and who
// reads the convention: ferry message send --key/--deleted, the sources'
// key_field and key_template, the PostgreSQL, MongoDB and Redis sinks,
// package live.
//
// # Example
//
//	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@127.0.0.1:8090")
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	stream, topic := iggy.NamedID("orders"), iggy.NamedID("created")
//
//	p, err := iggy.NewProducer(c, stream, topic, iggy.WithLinger(10*time.Millisecond))
//	if err != nil {
//		return err
//	}
//	ack := p.Send(ctx, iggy.Message{Payload: []byte(`{"id":1}`)})
//	if err := ack.Wait(ctx); err != nil { // nil: in the server's log
//		return err
//	}
//	_ = p.Close(ctx)
//
//	g, err := iggy.NewGroupConsumer(c, stream, topic, iggy.NamedID("billing"), iggy.WithCreateGroup())
//	if err != nil {
//		return err
//	}
//	defer g.Close(ctx)
//	for {
//		b, err := g.Poll(ctx)
//		if err != nil {
//			return err
//		}
//		handle(b.Messages)
//		if err := b.Commit(ctx); err != nil { // only now is the offset stored
//			return err
//		}
//	}
package iggy
