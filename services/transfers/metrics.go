package transfers

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Reasons of transfers_idempotency_conflicts_total.
const (
	// ConflictKeyReused: the Idempotency-Key already belongs to another
	// request body (422).
	ConflictKeyReused = "key_reused"
	// ConflictInProgress: the first request with the key has not finished
	// (409).
	ConflictInProgress = "in_progress"
)

// IdempotencyMetrics count what the Idempotency-Key protocol did with the
// POSTs that reached the store: replays of a finished request and conflicts.
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

// meteredStore counts the idempotency outcomes of Create; every other method
// is the wrapped store's.
type meteredStore struct {
	transfer.Store
	metrics *IdempotencyMetrics
}

// meterIdempotency returns store with its Create outcomes counted on m.
func meterIdempotency(store transfer.Store, m *IdempotencyMetrics) transfer.Store {
	return meteredStore{Store: store, metrics: m}
}

// Create implements transfer.Store. An existing record with the same
// fingerprint is a replay; with another fingerprint, a reused key (the
// service turns it into ErrKeyReused).
func (s meteredStore) Create(ctx context.Context, c transfer.Creation) (*transfer.Record, error) {
	rec, err := s.Store.Create(ctx, c)
	switch {
	case errors.Is(err, transfer.ErrInProgress):
		s.metrics.Conflicts.WithLabelValues(ConflictInProgress).Inc()
	case err != nil, rec == nil:
	case rec.Fingerprint == c.Fingerprint:
		s.metrics.Replays.Inc()
	default:
		s.metrics.Conflicts.WithLabelValues(ConflictKeyReused).Inc()
	}
	return rec, err
}
