package agent

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics. An agent given none keeps
// its own, registered nowhere: the pending figures are also the
// notifier's.
type Metrics struct {
	bytesUploaded   prometheus.Counter
	objectsUploaded prometheus.Counter
	uploadErrors    prometheus.Counter
	catalogUpdates  prometheus.Counter

	// The pending gauges are read when scraped: the bytes as of the last
	// look (every pass, failed or not, and every tick of an outage), their
	// age from now, so that it grows while nothing can be uploaded.
	mu           sync.Mutex
	pendingN     int64
	pendingSince time.Time
	now          func() time.Time
}

// NewMetrics registers the agent's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		bytesUploaded:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_uploaded_bytes_total", Help: "Bytes uploaded (as stored, after compression)."}),
		objectsUploaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_uploaded_objects_total", Help: "Objects uploaded."}),
		uploadErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_upload_errors_total", Help: "Uploads that failed after retries."}),
		catalogUpdates:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_catalog_updates_total", Help: "Catalog objects written."}),
		now:             time.Now,
	}
	bytesPending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ompsync_bytes_pending", Help: "Bytes written locally and not yet uploaded."},
		func() float64 { n, _, _ := m.pending(); return float64(n) })
	oldestPending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ompsync_oldest_pending_seconds", Help: "Seconds the oldest pending byte may have waited: since its file was last fully uploaded, or the agent was last up to date, whichever is later (0 when nothing is pending)."},
		func() float64 { _, _, age := m.pending(); return age.Seconds() })
	reg.MustRegister(bytesPending, oldestPending, m.bytesUploaded, m.objectsUploaded, m.uploadErrors, m.catalogUpdates)
	return m
}

// pending is what the pending gauges show now: the bytes not yet
// uploaded, since when the oldest of them has waited, and for how long.
func (m *Metrics) pending() (n int64, since time.Time, age time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pendingN > 0 && !m.pendingSince.IsZero() {
		age = max(m.now().Sub(m.pendingSince), 0)
	}
	return m.pendingN, m.pendingSince, age
}

func (m *Metrics) uploaded(bytes, objects int64) {
	m.bytesUploaded.Add(float64(bytes))
	m.objectsUploaded.Add(float64(objects))
}

func (m *Metrics) catalogUpdated() {
	m.catalogUpdates.Inc()
	m.objectsUploaded.Inc()
}

// setPending records the bytes not yet uploaded and since when the oldest
// of them waits.
func (m *Metrics) setPending(n int64, since time.Time) {
	m.mu.Lock()
	m.pendingN, m.pendingSince = n, since
	m.mu.Unlock()
}
