package broker

// describe_options (13): scope 1 (topic) answers wire.TopicOptionCatalog,
// the 8 topic options in upstream order with kinds, defaults and
// descriptions; scopes 2 (stream) and 3 (user) an empty list [0u32]; any
// other scope or an undecodable body status 3.

import "github.com/ferryhq/ferry/iggy/wire"

func handleDescribeOptions(b *Broker, r *request) reply {
	var req wire.DescribeOptions
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	switch req.Scope {
	case wire.ScopeTopic:
		return rawOf(&wire.DescribeOptionsReply{Options: wire.TopicOptionCatalog})
	case wire.ScopeStream, wire.ScopeUser:
		return rawOf(&wire.DescribeOptionsReply{})
	}
	return status(wire.ErrInvalidCommand.Code)
}
