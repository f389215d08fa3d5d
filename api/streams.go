package api

// GET /streams (Ferry extension): the Iggy server's streams and topics,
// read through the runtime's admin client. Upstream's connector runtime
// API has no /streams path.

import (
	"net/http"
	"time"

	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
)

// streamBody is one stream of GET /streams.
type streamBody struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	// CreatedAt is RFC 3339 (UTC), empty when the server says none.
	CreatedAt     string      `json:"created_at,omitempty"`
	MessagesCount uint64      `json:"messages_count"`
	SizeBytes     uint64      `json:"size_bytes"`
	Topics        []topicBody `json:"topics"`
}

// topicBody is one topic of a stream.
type topicBody struct {
	ID            uint32 `json:"id"`
	Name          string `json:"name"`
	CreatedAt     string `json:"created_at,omitempty"`
	Partitions    uint32 `json:"partitions"`
	MessagesCount uint64 `json:"messages_count"`
	SizeBytes     uint64 `json:"size_bytes"`
}

// getStreams serves GET /streams (Ferry extension): every stream, in the
// server's order, with its topics.
func (s *Server) getStreams(w http.ResponseWriter, r *http.Request) error {
	cl, err := s.admin()
	if err != nil {
		return err
	}
	streams, err := cl.ListStreams(r.Context())
	if err != nil {
		return iggyError(err)
	}
	out := make([]streamBody, 0, len(streams))
	for _, st := range streams {
		topics, err := cl.ListTopics(r.Context(), iggy.NumericID(st.ID))
		if dlq.IsNotFound(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return iggyError(err)
		}
		b := streamBody{ID: st.ID, Name: st.Name, CreatedAt: iggyTime(st.CreatedAt), MessagesCount: st.MessagesCount,
			SizeBytes: st.SizeBytes, Topics: make([]topicBody, 0, len(topics))}
		for _, t := range topics {
			b.Topics = append(b.Topics, topicBody{ID: t.ID, Name: t.Name, CreatedAt: iggyTime(t.CreatedAt),
				Partitions: t.PartitionsCount, MessagesCount: t.MessagesCount, SizeBytes: t.SizeBytes})
		}
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// iggyTime formats a time in µs since the epoch; "" for 0.
func iggyTime(us uint64) string {
	if us == 0 {
		return ""
	}
	return time.UnixMicro(int64(us)).UTC().Format(time.RFC3339Nano)
}
