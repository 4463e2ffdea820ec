package web

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Reasons of transfers_idempotency_conflicts_total.
const (
	// ConflictKeyReused: the Idempotency-Key already belongs to another
	// request body or to another client (422).
	ConflictKeyReused = "key_reused"
	// ConflictInProgress: the first request with the key has not finished
	// (409).
	ConflictInProgress = "in_progress"
)

// IdempotencyMetrics count what the Idempotency-Key protocol did with the
// POSTs that reached transfer.Service.Submit: replays of a finished request
// and conflicts. They count Submit's own decision (its replayed flag and its
// ErrKeyReused and ErrInProgress), so that a key of another client, which
// Submit refuses, is a conflict and never a replay.
type IdempotencyMetrics struct {
	// Replays counts POSTs answered with the stored first response
	// (Idempotent-Replayed: true).
	Replays prometheus.Counter
	// Conflicts counts POSTs refused because of their key, by reason
	// (key_reused, in_progress).
	Conflicts *prometheus.CounterVec
}

// NewIdempotencyMetrics creates the metrics with every series at zero, so
// that rate() and dashboards see them before the first replay, and registers
// them on reg (nil: not registered).
func NewIdempotencyMetrics(reg prometheus.Registerer) *IdempotencyMetrics {
	f := promauto.With(reg)
	m := &IdempotencyMetrics{
		Replays: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_idempotent_replays_total",
			Help: "POST /transferencias answered with the stored first response of the same Idempotency-Key and body.",
		}),
		Conflicts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "transfers_idempotency_conflicts_total",
			Help: "POST /transferencias refused because of its Idempotency-Key, by reason (key_reused: 422, in_progress: 409).",
		}, []string{"reason"}),
	}
	m.Conflicts.WithLabelValues(ConflictKeyReused)
	m.Conflicts.WithLabelValues(ConflictInProgress)
	return m
}

// Submitted counts what Submit returned for one POST: replayed true is a
// replay; ErrKeyReused and ErrInProgress are conflicts; a creation, a
// validation error or any other failure counts nothing. m may be nil.
func (m *IdempotencyMetrics) Submitted(replayed bool, err error) {
	switch {
	case m == nil:
	case errors.Is(err, transfer.ErrKeyReused):
		m.Conflicts.WithLabelValues(ConflictKeyReused).Inc()
	case errors.Is(err, transfer.ErrInProgress):
		m.Conflicts.WithLabelValues(ConflictInProgress).Inc()
	case err == nil && replayed:
		m.Replays.Inc()
	}
}
