package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// settleSQL marks PUBLISHED, in the settle's snapshot, every pending event
// not held back behind a DEAD event of its key. It runs only once the
// relay has settled the WAL position read in that same snapshot: every row
// the snapshot sees committed before that position, so the relay has
// published it (or set it DEAD, or held it back, which the statement
// skips).
const settleSQL = `
UPDATE outbox_event o SET status = 'PUBLISHED', published_at = now()
 WHERE o.status = 'PENDING'
   AND NOT EXISTS (SELECT 1 FROM outbox_event d
                    WHERE d.status = 'DEAD' AND d.topic = o.topic AND d.key = o.key AND d.seq < o.seq)`

// Settle marks the rows this relay has published as PUBLISHED, in one
// statement, and returns how many. It needs the relay to be streaming and
// to pass the current WAL position within wait; otherwise it marks nothing
// and returns 0.
func (r *LogicalRelay) Settle(ctx context.Context, wait time.Duration) (int64, error) {
	if !r.active.Load() {
		return 0, nil
	}
	tx, err := r.ob.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit, a no-op
	// Nothing pending in this snapshot: nothing to mark, and no heartbeat
	// (an idle database gets one every Heartbeat, not every settle).
	var pending bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_event WHERE status = 'PENDING')`).Scan(&pending); err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	if !pending {
		return 0, nil
	}
	// The insert position, not pg_current_wal_lsn (the write position):
	// with asynchronous commit a transaction is visible once its commit
	// record is inserted, before it is written, so only the insert position
	// is past every commit this snapshot sees.
	var pos string
	if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&pos); err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(pos)
	if err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	// A heartbeat after the position: the stream carries it even when no
	// event commits, so the relay passes the position.
	r.heartbeat(ctx)
	deadline := time.Now().Add(wait)
	for pglogrepl.LSN(r.acked.Load()) < lsn {
		if time.Now().After(deadline) || !r.active.Load() {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	tag, err := tx.Exec(ctx, settleSQL)
	if err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("settle: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (r *LogicalRelay) settleLoop(ctx context.Context) {
	periodic.Every(ctx, periodic.Fixed(r.cfg.SettleInterval), func() {
		// Bounded: the fence's wait, then a call's worth for the statements.
		sctx, cancel := context.WithTimeout(ctx, r.cfg.SettleInterval+postgres.CallTimeout)
		defer cancel()
		n, err := r.Settle(sctx, r.cfg.SettleInterval)
		if err != nil && ctx.Err() == nil {
			// A concurrent DEAD mark or operator action: the next settle
			// takes these rows.
			r.log.DebugContext(ctx, "outbox logical settle failed", "err", err)
		} else if n > 0 {
			r.lm.Settled.Add(float64(n))
		}
	})
}

// lagLoop refreshes the slot gauges: how much WAL the slot holds, and how
// old the oldest committed event not yet confirmed is.
func (r *LogicalRelay) lagLoop(ctx context.Context) {
	slot := r.slotName()
	periodic.Every(ctx, periodic.Fixed(r.poll.cfg.StatsInterval), func() {
		var lag int64
		qctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		defer cancel()
		err := r.ob.db.QueryRow(qctx, `
SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
		if err != nil {
			return
		}
		r.lm.LagBytes.Set(float64(lag))
		if t := r.oldestUnconfirmed.Load(); t != nil && !t.IsZero() {
			r.lm.LagSeconds.Set(time.Since(*t).Seconds())
		} else {
			r.lm.LagSeconds.Set(0)
		}
	})
}

// LogicalMetrics are the logical relay's own gauges and counters; the
// events' counters are the polling relay's (Metrics).
type LogicalMetrics struct {
	Active       prometheus.Gauge
	LagBytes     prometheus.Gauge
	LagSeconds   prometheus.Gauge
	LeftBehind   prometheus.Gauge
	HeldBack     prometheus.Counter
	Settled      prometheus.Counter
	SlotsCreated prometheus.Counter
	// SyncCandidate is 1 while the server counts this instance's
	// replication connection as a synchronous standby candidate.
	SyncCandidate prometheus.Gauge
}

// NewLogicalMetrics creates them, registered on reg (nil: not registered).
func NewLogicalMetrics(reg prometheus.Registerer) *LogicalMetrics {
	f := promauto.With(reg)
	return &LogicalMetrics{
		Active: f.NewGauge(prometheus.GaugeOpts{Name: "outbox_logical_active",
			Help: "1 while this instance streams the outbox's replication slot."}),
		LagBytes: f.NewGauge(prometheus.GaugeOpts{Name: "outbox_logical_slot_lag_bytes",
			Help: "WAL the logical relay's slot holds: current WAL position minus the slot's confirmed position."}),
		LagSeconds: f.NewGauge(prometheus.GaugeOpts{Name: "outbox_logical_lag_seconds",
			Help: "Age of the oldest committed outbox transaction the logical relay has not confirmed; 0 when none."}),
		LeftBehind: f.NewGauge(prometheus.GaugeOpts{Name: "outbox_logical_slot_left_behind",
			Help: "1 when a service on the polling relay finds its logical relay's slot: nobody reads it, and it holds WAL."}),
		HeldBack: f.NewCounter(prometheus.CounterOpts{Name: "outbox_logical_held_back_total",
			Help: "Events the logical relay held back behind a DEAD event of their key."}),
		Settled: f.NewCounter(prometheus.CounterOpts{Name: "outbox_logical_settled_total",
			Help: "Rows the logical relay marked PUBLISHED after publishing them."}),
		SlotsCreated: f.NewCounter(prometheus.CounterOpts{Name: "outbox_logical_slots_created_total",
			Help: "Replication slots the logical relay created (a first start, or a slot found lost)."}),
		SyncCandidate: f.NewGauge(prometheus.GaugeOpts{Name: "outbox_logical_synchronous_candidate",
			Help: "1 while synchronous_standby_names matches the logical relay's replication connection: it confirms nothing meanwhile (its slot holds WAL), so that no commit waits for it."}),
	}
}
