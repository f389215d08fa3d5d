package iggy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "iggy",
		Summary:   "reads a topic of another Iggy server through a consumer group, ids kept; the origin's offset is stored after the batch is in Iggy",
		Spec:      Spec,
		NewSource: NewSource,
	})
}

// Spec is the iggy source's plugin_config.
var Spec = connector.NewSpec(
	connector.NewStringField("address").Require().WithExample("127.0.0.1:8090").
		WithDoc(`the origin server: "host:port" or an Iggy connection string`),
	connector.NewStringField("username").WithDefault("").WithDoc("the origin's user (with password)"),
	connector.NewStringField("password").WithDefault("").AsSecret().WithDoc("the origin user's password"),
	connector.NewStringField("token").WithDefault("").AsSecret().WithDoc("a personal access token instead of username and password"),
	connector.NewStringField("stream").Require().WithCheck(checkName).WithExample("orders").WithDoc("the origin stream (name or numeric id)"),
	connector.NewStringField("topic").Require().WithCheck(checkName).WithExample("orders").WithDoc("the origin topic (name or numeric id)"),
	connector.NewStringField("consumer_group").WithDefault("").WithCheck(func(v any) error {
		if v == "" {
			return nil // the default
		}
		return checkName(v)
	}).
		WithDoc(`the origin consumer group whose offsets say where the source is; default "ferry-<key>", created when missing`),
	connector.NewIntField("batch_size").WithDefault(1000).Between(1, 100_000).
		WithDoc("messages per poll"),
	connector.NewDurationField("poll_interval").WithDefault(100*time.Millisecond).
		WithDoc("the pause between polls that found nothing"),
	connector.NewEnumField("schema", "raw", "json", "text").WithDefault("raw").
		WithDoc(`the payloads' schema; "raw" copies them byte for byte (give the stream schema = "raw" too)`),
)

// Source is the iggy source.
type Source struct {
	target, user, password, token string
	stream, topic, group          iggy.Identifier
	batchSize                     uint32
	pollInterval                  time.Duration
	schema                        connector.Schema

	client   *iggy.Client
	consumer *iggy.GroupConsumer

	mu      sync.Mutex
	pending map[*connector.Batch]*iggy.Batch // polled, not yet acknowledged
}

// NewSource builds an iggy source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := &Source{target: set.String("address"), user: set.String("username"), password: set.String("password"),
		token: set.String("token"), stream: identifier(set.String("stream")), topic: identifier(set.String("topic")),
		batchSize: uint32(set.Int("batch_size")), pollInterval: set.Duration("poll_interval"),
		schema: connector.Schema(set.String("schema")), pending: map[*connector.Batch]*iggy.Batch{}}
	group := set.String("consumer_group")
	if group == "" {
		group = "ferry-" + cfg.Key
	}
	if err := checkName(group); err != nil {
		return nil, set.Errorf("consumer_group", "the default, ferry-<key>, %v: name a group", err)
	}
	s.group = iggy.NamedID(group)
	if s.token != "" && (s.user != "" || s.password != "") {
		return nil, set.Errorf("token", "give a token or a username and password, not both")
	}
	if (s.user == "") != (s.password == "") {
		return nil, set.Errorf("password", "username and password go together")
	}
	return s, nil
}

// checkName refuses what Iggy takes for no name of a stream, topic or
// consumer group: it wants 1..255 bytes of UTF-8.
func checkName(v any) error {
	s, _ := v.(string)
	switch {
	case s == "":
		return errors.New("is empty; a name is 1..255 bytes of UTF-8")
	case len(s) > 255:
		return fmt.Errorf("is %d bytes; a name is 1..255 bytes of UTF-8", len(s))
	case !utf8.ValidString(s):
		return fmt.Errorf("%q is not UTF-8", s)
	}
	return nil
}

// identifier is a name, or a numeric id when v is all digits.
func identifier(v string) iggy.Identifier {
	var n uint32
	if _, err := fmt.Sscanf(v, "%d", &n); err == nil && fmt.Sprint(n) == v {
		return iggy.NumericID(n)
	}
	return iggy.NamedID(v)
}

// Open connects to the origin and joins the consumer group (creating it).
func (s *Source) Open(ctx context.Context, _ []byte) error {
	var opts []iggy.Option
	switch {
	case s.token != "":
		opts = append(opts, iggy.WithToken(s.token))
	case s.user != "":
		opts = append(opts, iggy.WithCredentials(s.user, s.password))
	}
	c, err := iggy.Dial(ctx, s.target, opts...)
	if err != nil {
		return connector.Unavailable(fmt.Errorf("connect to the origin %s: %w", s.target, err))
	}
	g, err := iggy.NewGroupConsumer(c, s.stream, s.topic, s.group, iggy.WithCreateGroup(),
		iggy.WithPollCount(s.batchSize), iggy.WithPollInterval(s.pollInterval))
	if err == nil {
		err = g.Join(ctx)
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("join consumer group %s of the origin's %s/%s: %w", s.group, s.stream, s.topic, err)
	}
	s.client, s.consumer = c, g
	return nil
}

// Poll returns the next batch of the origin, its messages as they are
// there: ids, headers, origin timestamps.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	ib, err := s.consumer.Poll(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("poll the origin's %s/%s: %w", s.stream, s.topic, err)
	}
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, len(ib.Messages))}
	for i, m := range ib.Messages {
		b.Messages[i] = connector.Message{ID: m.ID, Headers: m.Headers, Payload: m.Payload, OriginTimestamp: m.OriginTimestamp}
	}
	s.mu.Lock()
	s.pending[b] = ib
	s.mu.Unlock()
	return b, nil
}

// Ack stores the batch's last offset in the origin's consumer group: the
// batch is in Iggy.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	s.mu.Lock()
	ib := s.pending[b]
	delete(s.pending, b)
	s.mu.Unlock()
	if ib == nil {
		return nil
	}
	if err := ib.Commit(ctx); err != nil {
		return fmt.Errorf("store the origin offset %d of partition %d (the batch will be read again): %w", ib.LastOffset(), ib.Partition, err)
	}
	return nil
}

// Nack keeps the batch pending: the runtime sends it again itself.
func (s *Source) Nack(context.Context, *connector.Batch, error) {}

// Close leaves the group and closes the connection.
func (s *Source) Close(ctx context.Context) error {
	if s.client == nil {
		return nil
	}
	err := s.consumer.Close(ctx)
	s.client.Close()
	if errors.Is(err, iggy.ErrClosed) {
		err = nil
	}
	return err
}

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
)
