package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	bytesPending    prometheus.Gauge
	oldestPending   prometheus.Gauge
	bytesUploaded   prometheus.Counter
	objectsUploaded prometheus.Counter
	uploadErrors    prometheus.Counter
	catalogUpdates  prometheus.Counter
}

// NewMetrics registers the agent's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		bytesPending:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "ompsync_bytes_pending", Help: "Bytes written locally and not yet uploaded."}),
		oldestPending:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "ompsync_oldest_pending_seconds", Help: "Seconds the oldest pending byte may have waited: since its file was last fully uploaded, or the agent was last up to date, whichever is later (0 when nothing is pending)."}),
		bytesUploaded:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_uploaded_bytes_total", Help: "Bytes uploaded (as stored, after compression)."}),
		objectsUploaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_uploaded_objects_total", Help: "Objects uploaded."}),
		uploadErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_upload_errors_total", Help: "Uploads that failed after retries."}),
		catalogUpdates:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_catalog_updates_total", Help: "Catalog objects written."}),
	}
	reg.MustRegister(m.bytesPending, m.oldestPending, m.bytesUploaded, m.objectsUploaded, m.uploadErrors, m.catalogUpdates)
	return m
}

func (m *Metrics) uploaded(bytes, objects int64) {
	if m != nil {
		m.bytesUploaded.Add(float64(bytes))
		m.objectsUploaded.Add(float64(objects))
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.uploadErrors.Inc()
	}
}

func (m *Metrics) catalogUpdated() {
	if m != nil {
		m.catalogUpdates.Inc()
		m.objectsUploaded.Inc()
	}
}

func (m *Metrics) pending(n int64, since time.Time) {
	if m == nil {
		return
	}
	m.bytesPending.Set(float64(n))
	if n == 0 || since.IsZero() {
		m.oldestPending.Set(0)
	} else {
		m.oldestPending.Set(time.Since(since).Seconds())
	}
}
