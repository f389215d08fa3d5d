package broker

// Clients (codes 20-22). get_me (20) describes the caller's connection,
// get_client (21) the connection whose client id (the low 32 bits of the
// broker's transport id) is given, or an empty body; get_clients (22)
// every connection's header, by id. user_id is u32::MAX before login;
// the transport is 1 (TCP); groups list [stream][topic][group] ids.

import (
	"math"
	"sort"

	"github.com/ferryhq/ferry/iggy/wire"
)

func (c *conn) info() wire.ClientInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := wire.ClientInfo{ClientID: uint32(c.id), UserID: math.MaxUint32, Transport: 1, Address: c.remote}
	if c.bound {
		ci.UserID = c.userID
	}
	for g := range c.groups {
		ci.Groups = append(ci.Groups, wire.ClientGroup{Stream: g.topic.stream.id, Topic: g.topic.id, Group: g.id})
	}
	sort.Slice(ci.Groups, func(i, j int) bool {
		a, b := ci.Groups[i], ci.Groups[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Group < b.Group
	})
	ci.GroupsCount = uint32(len(ci.Groups))
	return ci
}

func handleGetMe(b *Broker, r *request) reply {
	ci := r.c.info()
	return rawOf(&ci)
}

func handleGetClient(b *Broker, r *request) reply {
	var req wire.GetClient
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	for _, c := range b.connList() {
		if uint32(c.id) == req.ClientID {
			ci := c.info()
			return rawOf(&ci)
		}
	}
	return raw(nil)
}

func handleGetClients(b *Broker, r *request) reply {
	conns := b.connList()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	list := make(wire.ClientList, 0, len(conns))
	for _, c := range conns {
		list = append(list, c.info())
	}
	return rawOf(&list)
}
