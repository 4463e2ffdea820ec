package consume

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// Metrics are the ledger's own metrics: settlements, the closing of
// reservations and the records its DLT monitor finds.
type Metrics struct {
	// Settlements counts decided and duplicate transfers by result
	// (LIQUIDADA, REJEITADA, DUPLICADA) and reason.
	Settlements *prometheus.CounterVec
	// BatchSize observes the transfers settled per database transaction.
	BatchSize prometheus.Histogram
	// DLTRecords counts the records found on the ledger's dead-letter
	// topics, by origin topic.
	DLTRecords *prometheus.CounterVec
	// Closings counts the reservations (holds) closed, by result:
	// LIQUIDADA (captured), CANCELADA, EXPIRADA (by the sweep, or by a
	// command that found it past its expiry), and ENCERRADA for a command
	// that found it already closed and changed nothing.
	Closings *prometheus.CounterVec
	// Refunds counts the refunds decided, by result (LIQUIDADO,
	// REJEITADO, and DUPLICADO for a redelivery that changed nothing)
	// and rejection reason.
	Refunds *prometheus.CounterVec
}

// refundReplayed is the result label of a refund decided before.
const refundReplayed = "DUPLICADO"

// refundReasons are the reasons of rejected refunds, created at 0 in
// Refunds with the other results.
var refundReasons = []string{ledger.ReasonUnauthorized, ledger.ReasonNotSettled, ledger.ReasonExceedsRefundable,
	ledger.ReasonInsufficientFunds}

// closingResults are the label values of Closings, created at 0.
var closingResults = []ledger.Outcome{ledger.Settled, ledger.Cancelled, ledger.Expired, ledger.AlreadyClosed}

// NewMetrics creates the ledger's metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
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
			Help: "Records found on the ledger's dead-letter topics, by origin topic.",
		}, []string{"origin_topic"}),
		Closings: f.NewCounterVec(prometheus.CounterOpts{
			Name: "ledger_reservation_closings_total",
			Help: "Reservations (holds) closed by the ledger, by result (LIQUIDADA, CANCELADA, EXPIRADA), and commands that found one closed (ENCERRADA).",
		}, []string{"result"}),
		Refunds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "ledger_refunds_total",
			Help: "Refunds decided by the ledger, by result (LIQUIDADO, REJEITADO, DUPLICADO for a redelivery that changed nothing) and rejection reason.",
		}, []string{"result", "reason"}),
	}
	for _, r := range closingResults {
		m.Closings.WithLabelValues(string(r))
	}
	m.Refunds.WithLabelValues(string(ledger.RefundSettled), "")
	m.Refunds.WithLabelValues(refundReplayed, "")
	for _, reason := range refundReasons {
		m.Refunds.WithLabelValues(string(ledger.RefundRejected), reason)
	}
	return m
}

// Expired counts rs, the reservations one expiry sweep released (a
// ledger.Service.RunExpiry observer).
func (m *Metrics) Expired(rs []ledger.Result) {
	for _, r := range rs {
		m.Closings.WithLabelValues(string(r.Outcome)).Inc()
	}
}
