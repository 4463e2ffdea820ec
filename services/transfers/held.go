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

// HeldMetrics watch the results the projection held because no transfer
// of the request they were decided for was visible (table
// resultado_retido): each is money the ledger moved, or refused to, for a
// transfer this service cannot show, until the re-apply task or an
// operator applies it, or an operator discards it.
type HeldMetrics struct {
	// Held counts results held since start.
	Held prometheus.Counter
	// Pending is how many held results are unresolved, read from the table.
	Pending prometheus.Gauge
	// Overdue is how many of those were received before the re-apply
	// window: only an operator resolves them (the alert's series).
	Overdue prometheus.Gauge
	// Reapplied counts held results the re-apply task applied.
	Reapplied prometheus.Counter
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
			Help: "Held settlement results not yet applied or discarded.",
		}),
		Overdue: f.NewGauge(prometheus.GaugeOpts{
			Name: "transfers_results_held_overdue",
			Help: "Held settlement results unresolved past HELD_REAPPLY_WINDOW: no longer re-applied automatically, an operator must apply or discard them.",
		}),
		Reapplied: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_results_reapplied_total",
			Help: "Held settlement results applied automatically once the transfer of the request they were decided for became visible.",
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

// heldCounter reads the held results: the unresolved ones, and those of
// them past the re-apply window (postgres.Store).
type heldCounter interface {
	CountHeld(ctx context.Context) (int64, error)
	CountHeldOverdue(ctx context.Context, window time.Duration) (int64, error)
}

// heldGaugeLoop sets m.Pending and m.Overdue from store every interval
// until ctx ends, the way the outbox relay refreshes its gauges. It
// returns nil.
func heldGaugeLoop(ctx context.Context, store heldCounter, window time.Duration, m *HeldMetrics, interval time.Duration, log *slog.Logger) error {
	refresh := func() { refreshHeld(ctx, store, window, m, log) }
	refresh()
	periodic.Every(ctx, periodic.Fixed(interval), refresh)
	return nil
}

// refreshHeld sets m.Pending and m.Overdue from store once; a failure
// keeps the last values.
func refreshHeld(ctx context.Context, store heldCounter, window time.Duration, m *HeldMetrics, log *slog.Logger) {
	n, err := store.CountHeld(ctx)
	if err == nil {
		m.Pending.Set(float64(n))
		n, err = store.CountHeldOverdue(ctx, window)
	}
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "count held results failed", "err", err)
		}
		return
	}
	m.Overdue.Set(float64(n))
}

// reapplyBatch is the most held results one pass of the re-apply task
// applies.
const reapplyBatch = 100

// ReapplyLoop applies, every interval until ctx ends, the held results
// received within window whose transfer has become visible with the
// request event they were decided for (postgres.Store.ReapplyHeld): a
// result that came back before its transfer's commit was visible reaches
// the transfer with no operator. A pass that applied a full batch runs
// again at once. Past window a held result is left to an operator (the
// Overdue gauge, alert TransfersResultsHeld). It returns nil.
func ReapplyLoop(ctx context.Context, reapply func(ctx context.Context, window time.Duration, limit int) (int, error),
	window time.Duration, m *HeldMetrics, interval time.Duration, log *slog.Logger) error {
	periodic.Every(ctx, periodic.Fixed(interval), func() {
		for ctx.Err() == nil {
			n, err := reapply(ctx, window, reapplyBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "re-apply held results failed", "err", err)
				}
				return
			}
			if n > 0 {
				m.Reapplied.Add(float64(n))
				log.InfoContext(ctx, "held results re-applied: their transfers became visible", "reapplied", n)
			}
			if n < reapplyBatch {
				return
			}
		}
	})
	return nil
}
