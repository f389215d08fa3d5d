package api

import (
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// runtimeStats is upstream's ConnectorRuntimeStats. Times are in
// microseconds (run_time a duration, start_time since the Unix epoch);
// memory in bytes; cpu_usage is the process's CPU use in percent of one
// core since the previous /stats call (or since the server was built),
// total_cpu_usage the whole host's in percent of all cores.
type runtimeStats struct {
	Version         string           `json:"connectors_runtime_version"`
	VersionSemver   *uint32          `json:"connectors_runtime_version_semver,omitempty"`
	ProcessID       uint32           `json:"process_id"`
	CPUUsage        float32          `json:"cpu_usage"`
	TotalCPUUsage   float32          `json:"total_cpu_usage"`
	MemoryUsage     uint64           `json:"memory_usage"`
	TotalMemory     uint64           `json:"total_memory"`
	AvailableMemory uint64           `json:"available_memory"`
	RunTime         uint64           `json:"run_time"`
	StartTime       uint64           `json:"start_time"`
	SourcesTotal    uint32           `json:"sources_total"`
	SourcesRunning  uint32           `json:"sources_running"`
	SinksTotal      uint32           `json:"sinks_total"`
	SinksRunning    uint32           `json:"sinks_running"`
	Connectors      []connectorStats `json:"connectors"`
	// Ferry: where the Iggy server is (the embedded broker's address when
	// it runs), with no credentials.
	IggyAddress  string `json:"iggy_address"`
	IggyEmbedded bool   `json:"iggy_embedded"`
}

// connectorStats is upstream's ConnectorStats: sources carry
// messages_produced and messages_sent, sinks messages_consumed and
// messages_processed.
type connectorStats struct {
	Key               string  `json:"key"`
	Name              string  `json:"name"`
	ConnectorType     string  `json:"connector_type"`
	Version           string  `json:"version"`
	VersionSemver     *uint32 `json:"version_semver,omitempty"`
	Status            string  `json:"status"`
	Enabled           bool    `json:"enabled"`
	MessagesProduced  *uint64 `json:"messages_produced,omitempty"`
	MessagesSent      *uint64 `json:"messages_sent,omitempty"`
	MessagesConsumed  *uint64 `json:"messages_consumed,omitempty"`
	MessagesProcessed *uint64 `json:"messages_processed,omitempty"`
	MessagesFiltered  uint64  `json:"messages_filtered"`
	Errors            uint64  `json:"errors"`
	// Ferry: messages sent to the dead-letter topic.
	MessagesDeadLettered uint64 `json:"messages_dead_lettered"`
	// Ferry: a sink's streams delivered with ordering "key" or "none":
	// messages pending, lanes, and the lanes held by failed writes.
	Lanes []runtime.LaneStats `json:"lanes,omitempty"`
	// Ferry: a sink's consumer groups behind each partition it reads
	// (committed offset to the partition's end), read from the server.
	Lag []runtime.PartitionLag `json:"lag,omitempty"`
	// LagTotal sums Lag.
	LagTotal *uint64 `json:"lag_total,omitempty"`
}

// Metric names the per-connector counters are read from.
const (
	metricProduced  = "iggy_connector_messages_produced_total"
	metricSent      = "iggy_connector_messages_sent_total"
	metricConsumed  = "iggy_connector_messages_consumed_total"
	metricProcessed = "iggy_connector_messages_processed_total"
	metricFiltered  = "iggy_connector_messages_filtered_total"
	metricErrors    = "iggy_connector_errors_total"
	metricDead      = "iggy_connector_messages_dead_lettered_total"
)

// getStats serves GET /stats.
func (s *Server) getStats(w http.ResponseWriter, r *http.Request) error {
	counters, err := s.counters()
	if err != nil {
		return err
	}
	sys := s.probe.sample()
	started := s.rt.StartedAt()
	semver := semverNumber(s.opts.version)
	st := runtimeStats{
		Version: s.opts.version, VersionSemver: semver, ProcessID: uint32(os.Getpid()),
		CPUUsage: sys.cpu, TotalCPUUsage: sys.totalCPU,
		MemoryUsage: sys.memory, TotalMemory: sys.totalMemory, AvailableMemory: sys.availableMemory,
		StartTime: micros(started), Connectors: []connectorStats{},
		IggyAddress: s.rt.IggyAddress(), IggyEmbedded: s.rt.Config() != nil && s.rt.Config().Iggy.Embedded(),
	}
	if !started.IsZero() {
		st.RunTime = uint64(max(time.Since(started), 0) / time.Microsecond)
	}
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, i := range s.rt.Connectors(kind) {
			c := counters[counterKey{kind, i.Key}]
			cs := connectorStats{Key: i.Key, Name: i.Name, ConnectorType: string(kind),
				Version: s.opts.version, VersionSemver: semver, Status: status(i.Status), Enabled: i.Enabled,
				MessagesFiltered: c[metricFiltered], Errors: c[metricErrors], MessagesDeadLettered: c[metricDead], Lanes: i.Lanes}
			sort.Slice(cs.Lanes, func(a, b int) bool {
				return cs.Lanes[a].Stream+"/"+cs.Lanes[a].Topic < cs.Lanes[b].Stream+"/"+cs.Lanes[b].Topic
			})
			running := i.Status == runtime.StatusRunning
			if kind == connector.KindSource {
				cs.MessagesProduced, cs.MessagesSent = ptr(c[metricProduced]), ptr(c[metricSent])
				st.SourcesTotal++
				if running {
					st.SourcesRunning++
				}
			} else {
				cs.MessagesConsumed, cs.MessagesProcessed = ptr(c[metricConsumed]), ptr(c[metricProcessed])
				if lag, err := s.rt.Lag(r.Context(), i.Key); err == nil {
					var total uint64
					for _, l := range lag {
						total += l.Lag
					}
					cs.Lag, cs.LagTotal = lag, &total
				}
				st.SinksTotal++
				if running {
					st.SinksRunning++
				}
			}
			st.Connectors = append(st.Connectors, cs)
		}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

type counterKey struct {
	kind connector.Kind
	key  string
}

// counters reads the per-connector counters from the runtime's metrics.
func (s *Server) counters() (map[counterKey]map[string]uint64, error) {
	out := map[counterKey]map[string]uint64{}
	m := s.rt.Metrics()
	if m == nil {
		return out, nil
	}
	families, err := m.Registry().Gather()
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Code: codeError, Reason: "read metrics: " + err.Error(), Err: err}
	}
	for _, f := range families {
		switch name := f.GetName(); name {
		case metricProduced, metricSent, metricConsumed, metricProcessed, metricFiltered, metricErrors, metricDead:
			for _, mt := range f.GetMetric() {
				var k counterKey
				for _, l := range mt.GetLabel() {
					switch l.GetName() {
					case "connector_key":
						k.key = l.GetValue()
					case "connector_type":
						k.kind = connector.Kind(l.GetValue())
					}
				}
				if out[k] == nil {
					out[k] = map[string]uint64{}
				}
				out[k][name] += uint64(mt.GetCounter().GetValue())
			}
		}
	}
	return out, nil
}

func ptr(v uint64) *uint64 { return &v }

// micros is t in microseconds since the Unix epoch; 0 for the zero time.
func micros(t time.Time) uint64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixMicro())
}

// semverNumber is upstream's numeric form of a version, major*1e6 +
// minor*1e3 + patch ("1.2.3" is 1002003); nil when v does not start with
// three dot-separated numbers (a "-dev" or "+build" suffix is ignored) or
// the number does not fit.
func semverNumber(v string) *uint32 {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return nil
	}
	var n [3]uint64
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil
		}
		n[i] = x
	}
	if n[1] > 999 || n[2] > 999 {
		return nil
	}
	total := n[0]*1_000_000 + n[1]*1_000 + n[2]
	if total > 1<<32-1 {
		return nil
	}
	r := uint32(total)
	return &r
}
