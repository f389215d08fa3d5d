package runtime

import (
	"net/http"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/transform"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Stages of a batch, with upstream's label values.
const (
	stagePrepare   = "prepare"   // transforms and encoding
	stageFFI       = "ffi"       // the connector's own call (Poll or Consume)
	stageDecode    = "decode"    // payload decoding of consumed messages
	stageIggySend  = "iggy_send" // sending to every configured stream
	stageStateSave = "state_save"
	stageTotal     = "total"
)

// Metrics are the runtime's Prometheus metrics, with upstream's names and
// labels (connector_key, connector_type, stage).
type Metrics struct {
	registry          *prometheus.Registry
	sourcesTotal      prometheus.Gauge
	sourcesRunning    prometheus.Gauge
	sinksTotal        prometheus.Gauge
	sinksRunning      prometheus.Gauge
	messagesProduced  *prometheus.CounterVec
	messagesSent      *prometheus.CounterVec
	messagesConsumed  *prometheus.CounterVec
	messagesProcessed *prometheus.CounterVec
	messagesFiltered  *prometheus.CounterVec
	messagesDead      *prometheus.CounterVec
	errors            *prometheus.CounterVec
	stageDuration     *prometheus.HistogramVec
	transformCounters *prometheus.GaugeVec
}

var connectorLabels = []string{"connector_key", "connector_type"}

func newMetrics() *Metrics {
	m := &Metrics{
		registry:       prometheus.NewRegistry(),
		sourcesTotal:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "iggy_connectors_sources_total", Help: "Total configured source connectors"}),
		sourcesRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "iggy_connectors_sources_running", Help: "Sources in Running status"}),
		sinksTotal:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "iggy_connectors_sinks_total", Help: "Total configured sink connectors"}),
		sinksRunning:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "iggy_connectors_sinks_running", Help: "Sinks in Running status"}),
		messagesProduced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_produced_total",
			Help: "Messages received from source polls"}, connectorLabels),
		messagesSent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_sent_total",
			Help: "Messages sent to Iggy by sources"}, connectorLabels),
		messagesConsumed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_consumed_total",
			Help: "Messages consumed from Iggy by sinks"}, connectorLabels),
		messagesProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_processed_total",
			Help: "Messages processed and written by sinks"}, connectorLabels),
		messagesFiltered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_filtered_total",
			Help: "Messages intentionally dropped by transforms"}, connectorLabels),
		messagesDead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_messages_dead_lettered_total",
			Help: "Messages sent to a dead-letter topic (Ferry)"}, connectorLabels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_connector_errors_total",
			Help: "Errors encountered"}, connectorLabels),
		stageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "iggy_connector_stage_duration_seconds",
			Help:    "Per-batch processing stage duration in seconds",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 10e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 5}},
			[]string{"connector_key", "connector_type", "stage"}),
		transformCounters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_transform_counter",
			Help: "A transform's own counter (wasm counter_add), summed since the runtime started (Ferry)"},
			[]string{"connector_key", "connector_type", "transform", "counter"}),
	}
	m.registry.MustRegister(m.sourcesTotal, m.sourcesRunning, m.sinksTotal, m.sinksRunning,
		m.messagesProduced, m.messagesSent, m.messagesConsumed, m.messagesProcessed,
		m.messagesFiltered, m.messagesDead, m.errors, m.stageDuration, m.transformCounters,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Registry is the Prometheus registry, for embedding programs that serve
// metrics themselves.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// connectorMetrics are one connector's counters, resolved once.
type connectorMetrics struct {
	produced, sent, consumed, processed, filtered, dead, errors prometheus.Counter
	stages                                                      map[string]prometheus.Observer
	counters                                                    *prometheus.GaugeVec // transformCounters curried by connector
}

func (m *Metrics) forConnector(kind connector.Kind, key string) *connectorMetrics {
	l := prometheus.Labels{"connector_key": key, "connector_type": string(kind)}
	c := &connectorMetrics{
		produced: m.messagesProduced.With(l), sent: m.messagesSent.With(l),
		consumed: m.messagesConsumed.With(l), processed: m.messagesProcessed.With(l),
		filtered: m.messagesFiltered.With(l), dead: m.messagesDead.With(l), errors: m.errors.With(l),
		stages:   map[string]prometheus.Observer{},
		counters: m.transformCounters.MustCurryWith(l),
	}
	for _, s := range []string{stagePrepare, stageFFI, stageDecode, stageIggySend, stageStateSave, stageTotal} {
		c.stages[s] = m.stageDuration.WithLabelValues(key, string(kind), s)
	}
	return c
}

// addCounters adds what the connector's transforms counted.
func (c *connectorMetrics) addCounters(cs []transform.Counter) {
	for _, k := range cs {
		c.counters.WithLabelValues(k.Transform, k.Name).Add(float64(k.Delta))
	}
}

// observe records the time since start for a stage.
func (c *connectorMetrics) observe(stage string, start time.Time) {
	c.stages[stage].Observe(time.Since(start).Seconds())
}
