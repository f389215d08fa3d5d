// Package random is the `random` source: it makes JSON records with an id,
// a title, a name and random text, like upstream's random source
// (libiggy_connector_random_source), for demos, tests and benchmarks.
//
// plugin_config:
//
//	interval = "1s"          # pause before each batch
//	max_count = 1000         # stop after this many messages in all (optional)
//	messages_range = [10, 50] # messages per batch: a random count in [min, max)
//	payload_size = 100       # length of each record's text
//
// The state is the number of messages produced so far (a little-endian
// u64, as upstream), so a restart continues the count and max_count holds
// across restarts.
package random

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "random",
		Aliases:   []string{"libiggy_connector_random_source"},
		Summary:   "JSON records with random text, for demos and tests",
		Spec:      Spec,
		NewSource: New,
	})
}

// Spec is the random source's plugin_config.
var Spec = connector.NewSpec(
	connector.NewDurationField("interval").WithDefault(time.Second).
		WithDoc("pause before each batch"),
	connector.NewIntField("max_count").AtLeast(0).WithExample(1000).
		WithDoc("stop after this many messages in all, across restarts; unset or 0 = never"),
	connector.NewListField("messages_range", connector.NewIntField("").Between(1, math.MaxUint32)).Between(2, 2).
		WithDefault([]int{10, 50}).WithDoc("messages per batch: a random count in [min, max)"),
	connector.NewIntField("payload_size").Between(0, 1<<20).WithDefault(100).
		WithDoc("length of each record's text"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if r := s.Ints("messages_range"); r[0] > r[1] {
		fail("messages_range", "expected [min, max] with min <= max, got [%d, %d]", r[0], r[1])
	}
})

// Source is the random source.
type Source struct {
	interval    time.Duration
	maxCount    uint64 // 0 = unlimited
	min, max    uint32
	payloadSize uint32
	produced    uint64
	rng         *rand.Rand
}

// New builds a random source from its configuration.
func New(cfg connector.Config) (connector.Source, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	r := set.Ints("messages_range")
	return &Source{interval: set.Duration("interval"), maxCount: uint64(set.Int("max_count")),
		min: uint32(r[0]), max: uint32(r[1]), payloadSize: uint32(set.Int("payload_size")),
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}, nil
}

// Open restores the count of messages produced.
func (s *Source) Open(_ context.Context, state []byte) error {
	if len(state) >= 8 {
		s.produced = binary.LittleEndian.Uint64(state)
	}
	return nil
}

type record struct {
	ID    uuid.UUID `json:"id"`
	Title string    `json:"title"`
	Name  string    `json:"name"`
	Text  string    `json:"text"`
}

const alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Poll waits the interval, then returns a batch of records.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.maxCount > 0 && s.produced >= s.maxCount {
		return nil, connector.ErrEndOfInput
	}
	t := time.NewTimer(s.interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	n := uint64(s.min)
	if s.max > s.min {
		n += s.rng.Uint64N(uint64(s.max - s.min))
	}
	if s.maxCount > 0 {
		n = min(n, s.maxCount-s.produced)
	}
	b := &connector.Batch{Schema: connector.SchemaJSON, Messages: make([]connector.Message, n)}
	text := make([]byte, s.payloadSize)
	for i := range b.Messages {
		for j := range text {
			text[j] = alphanumeric[s.rng.IntN(len(alphanumeric))]
		}
		payload, err := json.Marshal(record{ID: uuid.New(), Title: "Hello", Name: "World", Text: string(text)})
		if err != nil {
			return nil, fmt.Errorf("random: encode record: %w", err)
		}
		b.Messages[i].Payload = payload
	}
	s.produced += n
	b.State = binary.LittleEndian.AppendUint64(nil, s.produced)
	return b, nil
}

// Close does nothing.
func (s *Source) Close(context.Context) error { return nil }

var _ connector.Source = (*Source)(nil)
