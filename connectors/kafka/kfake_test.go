package kafka

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tests run against franz-go's in-process fake cluster (kfake): no
// Kafka broker can be installed here. See the package doc for what it
// does not model.

// startCluster starts a fake cluster with one-partition topics; it is
// closed when the test ends.
func startCluster(t testing.TB, topics []string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func addrOf(c *kfake.Cluster) string { return c.ListenAddrs()[0] }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "kafka", Plugin: connector.PluginConfig{Source: "kafka.toml", Values: values}}
}

// name is a topic or group name unique to the test.
func name(t testing.TB, prefix string) string {
	return prefix + "-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
}

// reader reads a topic from its start (no group), keeping what it read.
type reader struct {
	cl  *kgo.Client
	mu  sync.Mutex
	got []*kgo.Record
}

func newReader(t testing.TB, addr string, topics ...string) *reader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &reader{cl: cl}
}

// records polls what arrived since the last call and returns all read.
func (r *reader) records(t testing.TB) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	fs := r.cl.PollFetches(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	fs.EachRecord(func(rec *kgo.Record) { r.got = append(r.got, rec) })
	return append([]*kgo.Record(nil), r.got...)
}

// all reads until it has every record up to the topics' ends now.
func (r *reader) all(t testing.TB, addr string, topics ...string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	want := 0
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	var got []*kgo.Record
	connectortest.Eventually(t, fmt.Sprintf("%d records", want), func() bool {
		got = r.records(t)
		return len(got) >= want
	})
	return got
}

// values waits until at least n records were read and returns their
// values.
func (r *reader) values(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	connectortest.Eventually(t, fmt.Sprintf("%d records", n), func() bool {
		out = out[:0]
		for _, rec := range r.records(t) {
			out = append(out, string(rec.Value))
		}
		return len(out) >= n
	})
	return out
}

// produce writes values to topic (each with key k<i>) and waits for the
// acks.
func produce(t testing.TB, addr, topic string, from, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	var vals []string
	for i := from; i < from+n; i++ {
		v := fmt.Sprintf(`{"n":%d}`, i)
		vals = append(vals, v)
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return vals
}
