package broker

// Streams (codes 200-205).
//
// get_stream (200) answers StreamDetails, or an empty body when the stream
// does not exist; get_streams (201) the headers back to back, by id.
// create_stream (202, op 128) takes the lowest free id (0-based), refuses
// any option key with status 4041 (streams have none) and a taken name
// with the committed rejection 1012; it replies StreamDetails with no
// topics. update_stream (204, op 129) renames (1009 missing, 1012 taken).
// delete_stream (203, op 130) removes the stream with its topics, logs,
// groups and offsets, and the users' permissions on it (ids are reused); purge_stream (205, op 131) empties every partition
// of every topic and forgets their consumer offsets. Metadata changes are
// saved before the reply.

import (
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

func handleGetStream(b *Broker, r *request) reply {
	var req wire.StreamRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	s := b.streamBy(req.Stream)
	if s == nil {
		return raw(nil)
	}
	d := s.details()
	return rawOf(&d)
}

func handleGetStreams(b *Broker, r *request) reply {
	b.mu.RLock()
	defer b.mu.RUnlock()
	list := wire.StreamList{}
	for _, id := range sortedKeys(b.streams) {
		list = append(list, b.streams[id].header())
	}
	return rawOf(&list)
}

// checkStreamOptions applies the options rules of create/update_stream:
// structure (3 or 4043), then any key is unsupported (4041).
func checkStreamOptions(block []byte) (reply, bool) {
	entries, err := wire.ParseOptionsBlock(block)
	if err != nil {
		return status(codeOf(err)), false
	}
	if len(entries) > 0 {
		return status(wire.ErrUnsupportedOptionKey.Code), false
	}
	return reply{}, true
}

func (b *Broker) streamNamed(name string) *stream {
	for _, s := range b.streams {
		if s.name == name {
			return s
		}
	}
	return nil
}

func handleCreateStream(b *Broker, r *request) reply {
	var req wire.CreateStream
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if rep, ok := checkStreamOptions(req.Options); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streamNamed(req.Name) != nil {
		return rejected(wire.ErrStreamNameAlreadyExists.Code)
	}
	s := &stream{id: lowestFree(b.streams), name: req.Name, createdAt: nowMicros(), topics: map[uint32]*topic{}}
	b.streams[s.id] = s
	if err := b.saveMeta(); err != nil {
		delete(b.streams, s.id)
		return b.writeFailed("create stream", err)
	}
	b.events.streamEvent(sysevents.StreamCreated, s, "")
	d := s.details()
	return okResult(&d)
}

func handleUpdateStream(b *Broker, r *request) reply {
	var req wire.UpdateStream
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	if rep, ok := checkStreamOptions(req.Options); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streamBy(req.Stream)
	if s == nil {
		return rejected(wire.ErrStreamIDNotFound.Code)
	}
	if o := b.streamNamed(req.Name); o != nil && o != s {
		return rejected(wire.ErrStreamNameAlreadyExists.Code)
	}
	old := s.name
	s.name = req.Name
	if err := b.saveMeta(); err != nil {
		s.name = old
		return b.writeFailed("update stream", err)
	}
	if old != s.name {
		b.events.streamEvent(sysevents.StreamUpdated, s, old)
	}
	return okResult(nil)
}

func handleDeleteStream(b *Broker, r *request) reply {
	var req wire.StreamRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streamBy(req.Stream)
	if s == nil {
		return rejected(wire.ErrStreamIDNotFound.Code)
	}
	delete(b.streams, s.id)
	undo := b.forgetPermissionsOn(s.id, false, 0)
	if err := b.saveMeta(); err != nil {
		b.streams[s.id] = s
		undo()
		return b.writeFailed("delete stream", err)
	}
	for _, t := range s.topics {
		b.destroyTopic(t)
	}
	b.events.streamEvent(sysevents.StreamDeleted, s, "")
	return okResult(nil)
}

func handlePurgeStream(b *Broker, r *request) reply {
	var req wire.StreamRef
	if rep, ok := decode(r, &req); !ok {
		return rep
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streamBy(req.Stream)
	if s == nil {
		return rejected(wire.ErrStreamIDNotFound.Code)
	}
	for _, t := range s.topics {
		if err := b.purgeTopic(t); err != nil {
			return b.writeFailed("purge stream", err)
		}
	}
	b.events.streamEvent(sysevents.StreamPurged, s, "")
	return okResult(nil)
}
