package runtime

import (
	"encoding/binary"
	"fmt"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/sysevents"
)

// deadLettered publishes message.dead_lettered for each of msgs, which d
// has just sent to its dead-letter topic. What the event says comes from
// the dead-letter headers (deadletter.go). Its id is derived from the
// connector and the message's place (a sink's partition and offset, a
// source's message id), so a dead letter sent again after a retry gives
// the same event id.
func (e *events) deadLettered(d *deadLetter, msgs []iggy.Message) {
	if e == nil {
		return
	}
	for i := range msgs {
		m := &msgs[i]
		str := func(k string) string {
			v, ok := header.Get(m.Headers, k)
			if !ok {
				return ""
			}
			s, _ := v.Text()
			return s
		}
		data := sysevents.DeadLetterData{Connector: d.key, Kind: "source", Stream: str(HeaderDLQStream), Topic: str(HeaderDLQTopic),
			MessageID: fmt.Sprintf("%x", m.ID), DeadLetterStream: d.stream, DeadLetterTopic: d.topic, Error: str(HeaderDLQError)}
		if v, ok := header.Get(m.Headers, HeaderDLQPartition); ok && v.Kind == header.KindUint32 && len(v.Data) == 4 {
			p := binary.LittleEndian.Uint32(v.Data)
			data.Partition, data.Kind = &p, "sink"
		}
		if v, ok := header.Get(m.Headers, HeaderDLQOffset); ok && v.Kind == header.KindUint64 && len(v.Data) == 8 {
			o := binary.LittleEndian.Uint64(v.Data)
			data.Offset = &o
		}
		if v, ok := header.Get(m.Headers, HeaderDLQSourceIndex); ok && v.Kind == header.KindUint32 && len(v.Data) == 4 {
			n := binary.LittleEndian.Uint32(v.Data)
			data.SourceIndex = &n
		}
		key := fmt.Sprintf("%s/%s/%s/%x", d.key, data.Stream, data.Topic, m.ID)
		if data.Partition != nil && data.Offset != nil {
			key = fmt.Sprintf("%s/%s/%s/%d/%d", d.key, data.Stream, data.Topic, *data.Partition, *data.Offset)
		}
		e.emit(sysevents.MessageDeadLettered, "connectors/"+data.Kind+"/"+d.key, key, data)
	}
}
