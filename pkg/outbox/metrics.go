package outbox

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/broker"
)

// Metrics are the outbox's counters and gauges.
type Metrics struct {
	Pending       prometheus.Gauge
	OldestAge     prometheus.Gauge
	Dead          prometheus.Gauge
	KeysHeldBack  prometheus.Gauge
	Published     *prometheus.CounterVec
	SendFailures  *prometheus.CounterVec
	DeadTotal     prometheus.Counter
	EnqueueToAck  prometheus.Histogram
	BatchSize     prometheus.Histogram
	BatchDuration prometheus.Histogram
	EmptyClaims   prometheus.Counter
}

// NewMetrics creates the outbox metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_pending_events", Help: "Outbox events not yet published (PENDING or PROCESSING)."}),
		OldestAge: f.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_oldest_pending_age_seconds", Help: "Age of the oldest unpublished outbox event; 0 when none."}),
		Dead: f.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_dead_events", Help: "Outbox events in DEAD status, waiting for an operator."}),
		KeysHeldBack: f.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_keys_held_back", Help: "Keys whose oldest event waits for a retry or is DEAD, holding back later events of the key."}),
		Published: f.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_published_total", Help: "Outbox events acknowledged by the broker."}, []string{"topic", "type"}),
		SendFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_send_failures_total", Help: "Failed sends of outbox events, by cause (see broker.Causes)."}, []string{"cause"}),
		DeadTotal: f.NewCounter(prometheus.CounterOpts{
			Name: "outbox_dead_total", Help: "Outbox events that went DEAD."}),
		EnqueueToAck: f.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_enqueue_to_ack_seconds", Help: "Time from enqueue to broker acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		BatchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_relay_batch_size", Help: "Events per relay batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		BatchDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_relay_batch_duration_seconds", Help: "Time to claim, send and mark one relay batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		EmptyClaims: f.NewCounter(prometheus.CounterOpts{
			Name: "outbox_relay_empty_claims_total", Help: "Relay claims that found no event to send (a claim that found some is a batch)."}),
	}
	// Every cause exists at 0 from start: an alert on increase() sees the
	// first failure.
	for _, c := range broker.Causes {
		m.SendFailures.WithLabelValues(c)
	}
	return m
}
