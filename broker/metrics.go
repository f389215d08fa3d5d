package broker

// Prometheus metrics: Broker.MetricsHandler serves them, and
// Config.MetricsAddr serves that handler at /metrics on an HTTP listener of
// the broker's own. The registry is the broker's, never the global one, so
// brokers in one process do not collide.
//
// Every series is sampled from the live state at scrape time, as the
// upstream server samples its gauges (core/server/src/http/metrics.rs), so
// a deleted stream or topic takes its series with it. Upstream's names are
// kept where they exist (streams, topics, partitions, segments, messages,
// clients), with the iggy_broker_ prefix; the per-topic traffic, the
// connection states and the per-partition sizes are Ferry's. Traffic
// counters live in the topic and start at 0 when it is created or the
// broker restarts (a counter reset to Prometheus).

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// traffic counts a topic's messages and batch bytes in (sends) and out
// (polls). Safe for concurrent use.
type traffic struct {
	msgsIn, bytesIn, msgsOut, bytesOut atomic.Uint64
}

func (tr *traffic) in(msgs uint32, bytes int) {
	tr.msgsIn.Add(uint64(msgs))
	tr.bytesIn.Add(uint64(bytes))
}

func (tr *traffic) out(msgs uint32, bytes int) {
	tr.msgsOut.Add(uint64(msgs))
	tr.bytesOut.Add(uint64(bytes))
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("iggy_broker_"+name, help, labels, nil)
}

var (
	descStreams    = desc("streams", "total count of streams")
	descTopics     = desc("topics", "total count of topics")
	descPartitions = desc("partitions", "total count of partitions")
	descSegments   = desc("segments", "total count of segments")
	descMessages   = desc("messages", "total count of messages")
	descClients    = desc("clients", "total count of clients")
	descConns      = desc("connections", "open connections, by whether they have logged in", "state")
	descMsgsIn     = desc("messages_in_total", "messages received by send_messages", "stream", "topic")
	descBytesIn    = desc("bytes_in_total", "batch bytes received by send_messages", "stream", "topic")
	descMsgsOut    = desc("messages_out_total", "messages served by poll_messages", "stream", "topic")
	descBytesOut   = desc("bytes_out_total", "batch bytes served by poll_messages", "stream", "topic")
	descPartBytes  = desc("partition_size_bytes", "bytes stored in a partition", "stream", "topic", "partition")
	descPartMsgs   = desc("partition_messages", "messages stored in a partition", "stream", "topic", "partition")
)

// collector samples a broker at scrape time.
type collector struct{ b *Broker }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStreams, descTopics, descPartitions, descSegments, descMessages,
		descClients, descConns, descMsgsIn, descBytesIn, descMsgsOut, descBytesOut, descPartBytes, descPartMsgs} {
		ch <- d
	}
	for _, d := range compactDescs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	var topics, parts, segments, msgs uint64
	c.b.mu.RLock()
	for _, s := range c.b.streams {
		for _, t := range s.topics {
			topics++
			counter(descMsgsIn, t.traffic.msgsIn.Load(), s.name, t.name)
			counter(descBytesIn, t.traffic.bytesIn.Load(), s.name, t.name)
			counter(descMsgsOut, t.traffic.msgsOut.Load(), s.name, t.name)
			counter(descBytesOut, t.traffic.bytesOut.Load(), s.name, t.name)
			compactionMetrics(ch, c.b, t)
			for _, p := range t.parts {
				parts++
				st := p.stats()
				segments += uint64(st.segments)
				msgs += st.messages
				id := strconv.FormatUint(uint64(p.id), 10)
				gauge(descPartBytes, float64(st.sizeBytes), s.name, t.name, id)
				gauge(descPartMsgs, float64(st.messages), s.name, t.name, id)
			}
		}
	}
	streams := len(c.b.streams)
	c.b.mu.RUnlock()
	gauge(descStreams, float64(streams))
	gauge(descTopics, float64(topics))
	gauge(descPartitions, float64(parts))
	gauge(descSegments, float64(segments))
	gauge(descMessages, float64(msgs))

	var in, out int
	for _, cn := range c.b.connList() {
		if bound, _, _, _ := cn.sessionInfo(); bound {
			in++
		} else {
			out++
		}
	}
	gauge(descClients, float64(in+out))
	gauge(descConns, float64(in), "logged_in")
	gauge(descConns, float64(out), "not_logged_in")
}

func newRegistry(b *Broker) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collector{b},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(b.events.collectors()...)
	return r
}

// MetricsHandler serves the broker's metrics in the Prometheus text
// format, for an embedder to mount where it likes; Config.MetricsAddr
// serves it at /metrics.
func (b *Broker) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(b.registry, promhttp.HandlerOpts{})
}

// MetricsAddr returns the address of the metrics listener, or "" when
// Config.MetricsAddr is not set.
func (b *Broker) MetricsAddr() string { return b.metricsAddr }
