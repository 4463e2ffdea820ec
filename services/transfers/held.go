package transfers

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// HeldMetrics watch the results the projection held because their
// transfer was unknown (table resultado_retido): each is money the ledger
// moved, or refused to, for a transfer this service cannot show, until an
// operator applies or discards it.
type HeldMetrics struct {
	// Held counts results held since start.
	Held prometheus.Counter
	// Pending is how many held results are unresolved, read from the table.
	Pending prometheus.Gauge
}

// NewHeldMetrics creates the metrics at zero and registers them on reg
// (nil: not registered).
func NewHeldMetrics(reg prometheus.Registerer) *HeldMetrics {
	f := promauto.With(reg)
	return &HeldMetrics{
		Held: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_results_held_total",
			Help: "Settlement results held because no transfer had their id (kept in resultado_retido, not dropped).",
		}),
		Pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "transfers_results_held",
			Help: "Held settlement results an operator has not yet applied or discarded.",
		}),
	}
}

// heldStore counts the results ApplyResults held; every
// other method is the wrapped store's.
type heldStore struct {
	transfer.Store
	metrics *HeldMetrics
}

// meterHeld returns store with the results it holds counted on m.
func meterHeld(store transfer.Store, m *HeldMetrics) transfer.Store {
	return heldStore{Store: store, metrics: m}
}

// ApplyResults implements transfer.Store.
func (s heldStore) ApplyResults(ctx context.Context, rs []transfer.Result) ([]transfer.Outcome, error) {
	out, err := s.Store.ApplyResults(ctx, rs)
	for _, o := range out {
		if o == transfer.Held {
			s.metrics.Held.Inc()
		}
	}
	return out, err
}

// heldGaugeLoop sets m.Pending from count every interval until ctx ends,
// the way the outbox relay refreshes its gauges. It returns nil.
func heldGaugeLoop(ctx context.Context, count func(context.Context) (int64, error), m *HeldMetrics, interval time.Duration, log *slog.Logger) error {
	refresh := func() { refreshHeld(ctx, count, m, log) }
	refresh()
	periodic.Every(ctx, periodic.Fixed(interval), refresh)
	return nil
}

// refreshHeld sets m.Pending from count once; a failure keeps the last
// value.
func refreshHeld(ctx context.Context, count func(context.Context) (int64, error), m *HeldMetrics, log *slog.Logger) {
	n, err := count(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "count held results failed", "err", err)
		}
		return
	}
	m.Pending.Set(float64(n))
}
