package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/periodic"
	pg "github.com/paysuite/payments/pkg/postgres"
)

// metrics are the projection's, counted where it writes. The held ones
// watch the results held because no transfer of the request they were
// decided for was visible (resultado_retido): each is money the ledger
// moved, or refused to, for a transfer this service cannot show, until the
// re-apply task or an operator applies it, or an operator discards it.
type metrics struct {
	// held counts results held since start.
	held prometheus.Counter
	// pending is how many held results are unresolved, read from the table.
	pending prometheus.Gauge
	// overdue is how many of those were received before the re-apply
	// window: only an operator resolves them (the alert's series).
	overdue prometheus.Gauge
	// reapplied counts held results ReapplyHeld applied.
	reapplied prometheus.Counter
	// duplicates counts the results skipped as already processed (see
	// ApplyResults), under the consumer's label.
	duplicates prometheus.Counter
}

// newMetrics creates the metrics at zero and registers them on reg (nil:
// not registered).
func newMetrics(reg prometheus.Registerer, consumer string) *metrics {
	f := promauto.With(reg)
	return &metrics{
		held: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_results_held_total",
			Help: "Settlement results held because no transfer had their id (kept in resultado_retido, not dropped).",
		}),
		pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "transfers_results_held",
			Help: "Held settlement results not yet applied or discarded.",
		}),
		overdue: f.NewGauge(prometheus.GaugeOpts{
			Name: "transfers_results_held_overdue",
			Help: "Held settlement results unresolved past HELD_REAPPLY_WINDOW: no longer re-applied automatically, an operator must apply or discard them.",
		}),
		reapplied: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_results_reapplied_total",
			Help: "Held settlement results applied automatically once the transfer of the request they were decided for became visible.",
		}),
		duplicates: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_duplicates_total",
			Help: "Deliveries skipped because the inbox had already processed the event.",
		}, []string{"consumer"}).WithLabelValues(consumer),
	}
}

// HeldGaugesLoop calls RefreshHeldGauges every interval until ctx ends,
// the way the outbox relay refreshes its gauges. It returns nil.
func (s *Store) HeldGaugesLoop(ctx context.Context, window, interval time.Duration, log *slog.Logger) error {
	refresh := func() { s.RefreshHeldGauges(ctx, window, log) }
	refresh()
	periodic.Every(ctx, periodic.Fixed(interval), refresh)
	return nil
}

// RefreshHeldGauges sets transfers_results_held and
// transfers_results_held_overdue (past window) from the table once, both
// reads within postgres.CallTimeout; a failure keeps the last values.
func (s *Store) RefreshHeldGauges(ctx context.Context, window time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, pg.CallTimeout)
	defer cancel()
	n, err := s.CountHeld(ctx)
	if err == nil {
		s.metrics.pending.Set(float64(n))
		n, err = s.CountHeldOverdue(ctx, window)
	}
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "count held results failed", "err", err)
		}
		return
	}
	s.metrics.overdue.Set(float64(n))
}
