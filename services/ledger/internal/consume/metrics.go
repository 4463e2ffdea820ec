package consume

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the ledger's own metrics: settlements and the records its
// DLT monitor finds.
type Metrics struct {
	// Settlements counts decided and duplicate transfers by result
	// (LIQUIDADA, REJEITADA, DUPLICADA) and reason.
	Settlements *prometheus.CounterVec
	// BatchSize observes the transfers settled per database transaction.
	BatchSize prometheus.Histogram
	// DLTRecords counts the records found on the ledger's dead-letter
	// topic, by origin topic.
	DLTRecords *prometheus.CounterVec
}

// NewMetrics creates the ledger's metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Settlements: f.NewCounterVec(prometheus.CounterOpts{
			Name: "ledger_settlements_total",
			Help: "Transfers handled by the ledger, by result (LIQUIDADA, REJEITADA, DUPLICADA) and rejection reason.",
		}, []string{"result", "reason"}),
		BatchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "ledger_settlement_batch_size",
			Help:    "Transfers settled per database transaction.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
		DLTRecords: f.NewCounterVec(prometheus.CounterOpts{
			Name: "ledger_dlt_messages_total",
			Help: "Records found on the ledger's dead-letter topic, by origin topic.",
		}, []string{"origin_topic"}),
	}
}
