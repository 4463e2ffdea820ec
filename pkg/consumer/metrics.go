package consumer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the consumer loop's counters and histograms.
type Metrics struct {
	Records   *prometheus.CounterVec
	Duration  *prometheus.HistogramVec
	Retries   *prometheus.CounterVec
	DLT       *prometheus.CounterVec
	Lag       *prometheus.GaugeVec
	BatchSize prometheus.Histogram
	// Outage counts the waits for unavailable dependencies (outage.go).
	Outage outageMetrics
	// CommitFailures counts offsets whose commit failed, by group and
	// reason (commit.go).
	CommitFailures *prometheus.CounterVec
}

// NewMetrics creates the consumer metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Records: f.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_records_total", Help: "Records handled, by group, topic and outcome (ok, retry, dlt, poison)."},
			[]string{"group", "topic", "outcome"}),
		Duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "consumer_handler_duration_seconds", Help: "Handler duration per record.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"group", "topic"}),
		Retries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_retries_total", Help: "Retries scheduled, by group and attempt number."},
			[]string{"group", "attempt"}),
		DLT: f.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_dlt_records_total", Help: "Records sent to a DLT, by origin topic."},
			[]string{"origin_topic"}),
		Lag: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "consumer_lag", Help: "Last stable offset minus the committed offset, by group, topic and partition."},
			[]string{"group", "topic", "partition"}),
		BatchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name: "consumer_batch_size", Help: "Records per batch of more than one handed to the handler.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		Outage: newOutageMetrics(f),
		CommitFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_commit_failures_total",
			Help: "Partition offsets whose commit failed (refused by the broker: rebalance_in_progress, illegal_generation, unknown_member_id; or timeout, other), by group and reason."},
			[]string{"group", "reason"}),
	}
	return m
}

func (m *Metrics) observe(group, topic, outcome string, d time.Duration) {
	m.Records.WithLabelValues(group, topic, outcome).Inc()
	m.Duration.WithLabelValues(group, topic).Observe(d.Seconds())
}
