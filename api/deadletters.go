package api

// GET and POST /{kind}s/{key}/dead_letters (Ferry extension): the
// dead-letter topics a connector writes to, their letters, and replaying
// them (package dlq).

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
)

// Letters listed per partition: by default the newest, at most.
const (
	defaultLetters = 50
	maxLetters     = 1000
)

// deadLettersBody is GET /{kind}s/{key}/dead_letters.
type deadLettersBody struct {
	Key string `json:"key"`
	// DeadLetter is false when no stream of the connector has on_error =
	// "dead_letter"; Note then says so, and Topics is empty.
	DeadLetter bool   `json:"dead_letter"`
	Note       string `json:"note,omitempty"`
	// Offset is the ?offset asked for (null: the newest Limit letters of
	// each partition); Limit is the most letters listed per partition.
	Offset *uint64           `json:"offset"`
	Limit  uint32            `json:"limit"`
	Topics []deadLetterTopic `json:"topics"`
}

// deadLetterTopic is one dead-letter topic of the connector. A topic
// that does not exist yet (nothing was dead-lettered) has Exists false
// and no letters.
type deadLetterTopic struct {
	dlq.Topic
	Exists  bool         `json:"exists"`
	Letters []dlq.Letter `json:"letters"`
}

// replayRequest is the body of POST /{kind}s/{key}/dead_letters/replay.
type replayRequest struct {
	Stream string `json:"stream"`
	Topic  string `json:"topic"`
	// To is STREAM/TOPIC to send every letter to; by default each goes
	// back where it was dead-lettered from.
	To string `json:"to"`
	// Partition and Offset together replay that one letter, leaving the
	// replay offset alone.
	Partition *uint32 `json:"partition"`
	Offset    *uint64 `json:"offset"`
	// From and Count bound a replay of many (dlq.ReplayOptions).
	From   *uint64 `json:"from"`
	Count  uint32  `json:"count"`
	DryRun bool    `json:"dry_run"`
}

// Codes of the dead-letter answers.
const (
	codeDeadLetterNotFound = "dead_letter_not_found"
	codeNotADeadLetter     = "not_a_dead_letter"
	codeTopicNotFound      = "topic_not_found"
)

// getDeadLetters serves GET /{kind}s/{key}/dead_letters (Ferry extension).
func (s *Server) getDeadLetters(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	q := r.URL.Query()
	body := deadLettersBody{Key: key, Limit: defaultLetters, Topics: []deadLetterTopic{}}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("offset", "expected an offset (a non-negative integer), got %q", v)
		}
		body.Offset = &n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 || n > maxLetters {
			return badRequest("limit", "expected 1 to %d letters per partition, got %q", maxLetters, v)
		}
		body.Limit = uint32(n)
	}
	targets, err := s.deadLetterTopics(r, kind, key)
	if err != nil {
		return err
	}
	cl, err := s.admin()
	if err != nil {
		return err
	}
	body.DeadLetter = len(targets) > 0
	if !body.DeadLetter {
		body.Note = fmt.Sprintf(`no stream of %s %q has on_error = "dead_letter": a message it cannot deliver stops it instead (on_error = "stop")`, kind, key)
	}
	for _, t := range targets {
		st, err := dlq.Stat(r.Context(), cl, t.stream, t.topic)
		if dlq.IsNotFound(err) {
			body.Topics = append(body.Topics, deadLetterTopic{Topic: dlq.Topic{Stream: t.stream, Topic: t.topic, Partitions: []dlq.Partition{}},
				Letters: []dlq.Letter{}})
			continue
		}
		if err != nil {
			return iggyError(err)
		}
		var letters []dlq.Letter
		if body.Offset != nil {
			letters, err = dlq.Read(r.Context(), cl, t.stream, t.topic, *body.Offset, body.Limit)
		} else {
			letters, err = dlq.ReadNewest(r.Context(), cl, st, body.Limit)
		}
		if err != nil && !dlq.IsNotFound(err) { // deleted since Stat: none
			return iggyError(err)
		}
		if letters == nil {
			letters = []dlq.Letter{}
		}
		body.Topics = append(body.Topics, deadLetterTopic{Topic: st, Exists: true, Letters: letters})
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// replayDeadLetters serves POST /{kind}s/{key}/dead_letters/replay
// (Ferry extension).
func (s *Server) replayDeadLetters(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	data, err := readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeReplay(data)
	if err != nil {
		return err
	}
	targets, err := s.deadLetterTopics(r, kind, key)
	if err != nil {
		return err
	}
	if !containsTarget(targets, req.Stream, req.Topic) {
		return badRequest("topic", "%s/%s is not a dead-letter topic of %s %q (%s)", req.Stream, req.Topic, kind, key, describeTargets(targets))
	}
	o := dlq.ReplayOptions{Stream: req.Stream, Topic: req.Topic, From: req.From, Count: req.Count, DryRun: req.DryRun}
	if req.To != "" {
		var ok bool
		if o.ToStream, o.ToTopic, ok = strings.Cut(req.To, "/"); !ok || o.ToStream == "" || o.ToTopic == "" {
			return badRequest("to", "expected STREAM/TOPIC, got %q", req.To)
		}
	}
	cl, err := s.admin()
	if err != nil {
		return err
	}
	st, err := dlq.Stat(r.Context(), cl, req.Stream, req.Topic)
	if dlq.IsNotFound(err) { // nothing was dead-lettered yet
		if req.Partition != nil {
			return &APIError{Status: http.StatusNotFound, Code: codeDeadLetterNotFound,
				Reason: fmt.Sprintf("%s/%s does not exist yet: nothing was dead-lettered", req.Stream, req.Topic), Err: err}
		}
		writeJSON(w, http.StatusOK, dlq.ReplayResult{To: map[string]int{}, DryRun: req.DryRun, Messages: []dlq.Sent{}})
		return nil
	}
	if err != nil {
		return iggyError(err)
	}
	if req.Partition != nil {
		if uint64(*req.Partition) >= uint64(len(st.Partitions)) {
			return badRequest("partition", "%s/%s has %d partition(s), numbered from 0; got %d", req.Stream, req.Topic, len(st.Partitions), *req.Partition)
		}
		o.One = &dlq.Position{Partition: *req.Partition, Offset: *req.Offset}
	}
	res, err := dlq.Replay(r.Context(), cl, o)
	switch {
	case errors.Is(err, dlq.ErrNoLetter):
		return &APIError{Status: http.StatusNotFound, Code: codeDeadLetterNotFound, Reason: err.Error(), Err: err}
	case errors.Is(err, dlq.ErrNotALetter):
		return &APIError{Status: http.StatusBadRequest, Code: codeNotADeadLetter,
			Reason: fmt.Sprintf("to: %v (replayed %d before it)", err, res.Replayed), Err: err}
	case dlq.IsNotFound(err):
		return &APIError{Status: http.StatusNotFound, Code: codeTopicNotFound,
			Reason: fmt.Sprintf("%v (replayed %d before it)", err, res.Replayed), Err: err}
	case err != nil:
		return &APIError{Status: http.StatusInternalServerError, Code: codeError,
			Reason: fmt.Sprintf("%v (replayed %d before it)", err, res.Replayed), Err: err}
	}
	if !req.DryRun {
		s.log.Info("dead letters replayed through the API", "connector_type", string(kind), "connector_key", key,
			"stream", req.Stream, "topic", req.Topic, "replayed", res.Replayed)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// decodeReplay reads a replay request; unknown fields are refused, naming
// them, so that a misspelt "dry_run" does not replay for real.
func decodeReplay(body []byte) (replayRequest, error) {
	var req replayRequest
	const example = `{"stream": "s", "topic": "k_dead_letter"}`
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return req, badRequest(te.Field, "expected %s, got a JSON %s", te.Type, te.Value)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return req, badRequest(strings.Trim(field, `"`), "unknown field (expected stream, topic, to, partition, offset, from, count, dry_run)")
		}
		return req, badRequest("request body", "expected a JSON object such as %s: %v", example, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, badRequest("request body", "expected one JSON object such as %s, got more data after it", example)
	}
	switch {
	case req.Stream == "":
		return req, badRequest("stream", "required: the stream of the dead-letter topic, as in %s", example)
	case req.Topic == "":
		return req, badRequest("topic", "required: the dead-letter topic, as in %s", example)
	case (req.Partition == nil) != (req.Offset == nil):
		field := "offset"
		if req.Partition == nil {
			field = "partition"
		}
		return req, badRequest(field, "partition and offset go together: they name the one dead letter to replay")
	case req.Partition != nil && (req.From != nil || req.Count != 0):
		return req, badRequest("from", "partition and offset replay one dead letter: from and count do not apply")
	}
	return req, nil
}

// target is one dead-letter topic.
type target struct{ stream, topic string }

// deadLetterTopics are the dead-letter topics of a connector's running
// configuration (its active one when none runs), defaults applied, each
// once, in the order of its streams.
func (s *Server) deadLetterTopics(r *http.Request, kind connector.Kind, key string) ([]target, error) {
	info, err := s.rt.Connector(kind, key)
	if err != nil {
		return nil, runtimeError(kind, key, err)
	}
	c := info.Config
	if c == nil {
		p, err := s.provider()
		if err != nil {
			return nil, err
		}
		if c, err = p.Active(r.Context(), config.Kind(kind), key); err != nil {
			return nil, providerError(kind, key, nil, err)
		}
	}
	var out []target
	add := func(stream, topic string) {
		if !containsTarget(out, stream, topic) {
			out = append(out, target{stream, topic})
		}
	}
	for i := range c.Consumers {
		if cs := &c.Consumers[i]; cs.OnError == config.PolicyDeadLetter {
			add(cmp.Or(cs.DeadLetterStream, cs.Stream), cmp.Or(cs.DeadLetterTopic, config.DefaultDeadLetterTopic(key)))
		}
	}
	for i := range c.Producers {
		if stream, topic, ok := c.Producers[i].DeadLetterTarget(key); ok {
			add(stream, topic)
		}
	}
	return out, nil
}

func containsTarget(ts []target, stream, topic string) bool {
	for _, t := range ts {
		if t.stream == stream && t.topic == topic {
			return true
		}
	}
	return false
}

func describeTargets(ts []target) string {
	if len(ts) == 0 {
		return `it has none: no stream has on_error = "dead_letter"`
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.stream + "/" + t.topic
	}
	return "its dead-letter topics: " + strings.Join(names, ", ")
}

// admin is the runtime's Iggy client.
func (s *Server) admin() (*iggy.Client, error) {
	cl := s.rt.Admin()
	if cl == nil {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
			Reason: "the runtime has not started: no connection to the Iggy server yet"}
	}
	return cl, nil
}

// iggyError is an error of the Iggy server: 502, the server's answer in
// the reason.
func iggyError(err error) error {
	return &APIError{Status: http.StatusBadGateway, Code: codeError, Reason: "iggy server: " + err.Error(), Err: err}
}
