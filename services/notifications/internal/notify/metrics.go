package notify

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics count sends by channel and outcome.
type Metrics struct {
	Sends    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

// Send outcomes, the "outcome" label of notifications_sends_total.
const (
	OutcomeDelivered     = "delivered"
	OutcomeFailed        = "failed"
	OutcomeTimeout       = "timeout"
	OutcomeNoDestination = "no_destination"
	OutcomeDuplicate     = "duplicate"
)

// NewMetrics creates the metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Sends: f.NewCounterVec(prometheus.CounterOpts{
			Name: "notifications_sends_total",
			Help: "Notification attempts by channel and outcome (delivered, failed, timeout, no_destination, duplicate).",
		}, []string{"channel", "outcome"}),
		Duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "notifications_send_duration_seconds",
			Help:    "Duration of notification sends by channel.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"channel"}),
	}
}
