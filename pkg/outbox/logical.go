package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
)

// The logical relay reads the outbox from PostgreSQL's write-ahead log
// instead of polling the table: a publication on outbox_event (inserts only)
// and one logical replication slot per database, decoded by pgoutput. The
// stream hands it every committed insert in commit order, transaction by
// transaction, so per-key order needs no claim and the hot path writes no
// row per event: what has been published is the slot's confirmed position.
//
// Guarantees, and the mechanism behind each:
//   - Nothing is lost across a crash at any point: the relay confirms to
//     PostgreSQL (confirmed_flush_lsn) only the end of a transaction whose
//     every event the broker acknowledged, and resumes from the slot's
//     position, never from one of its own. Write, flush and apply positions
//     are all set to that LSN (an unset flush position would be read as the
//     write position, which can lie past unsent events).
//   - Per-key order as committed: one sender publishes the stream's batches
//     one after the other, a failed event is retried before anything of its
//     key that follows it, and a key whose event went DEAD is held back.
//   - One active relay per database: PostgreSQL lets one connection stream a
//     slot at a time; a second instance retries every TakeoverRetry and
//     takes over as soon as the first one's connection is gone.
//   - A record the broker refuses does not block the stream: after
//     RefusalAttempts tries it turns DEAD in the table (the polling relay's
//     status), its key is held back (the hold is the DEAD row, so it
//     survives a restart), and the operator tools work on it as before; a
//     requeue or discard re-inserts the key's held rows, which the stream
//     then carries (an insert-only publication never sees an UPDATE).
//   - The slot never holds WAL for an idle database: a heartbeat message is
//     written into the WAL every Heartbeat, and its transaction's end is
//     confirmed like any other.
//   - The table stays the record: every SettleInterval, rows the relay has
//     provably passed are marked PUBLISHED in one statement (settle.go), so
//     the gauges, the retention cleanup and the polling relay, if the
//     service switches back, see the truth.

// LogicalRelay publishes committed outbox events read from the WAL. Any
// number may run against one database: one streams, the others wait.
type LogicalRelay struct {
	ob      *Outbox
	pub     broker.Publisher
	cfg     LogicalConfig
	poll    *Relay // the polling relay's send path, DEAD rules and drain
	log     *slog.Logger
	metrics *Metrics
	lm      *LogicalMetrics
	// acked is the end LSN of the last transaction whose every event is
	// settled (acknowledged, DEAD or held back): what the relay confirms.
	acked atomic.Uint64
	// active is set while this instance streams the slot.
	active atomic.Bool
	// oldestUnconfirmed is the commit time of the batch in the sender's
	// hands, nil when it has none: the lag gauge's source.
	oldestUnconfirmed atomic.Pointer[time.Time]
}

// NewLogicalRelay returns a logical relay publishing ob's events through
// pub. pollCfg gives the send timeout, backoff, batch size and retention it
// shares with the polling relay. metrics and lm may be nil.
func NewLogicalRelay(ob *Outbox, pub broker.Publisher, cfg LogicalConfig, pollCfg RelayConfig, log *slog.Logger, metrics *Metrics, lm *LogicalMetrics) *LogicalRelay {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if lm == nil {
		lm = NewLogicalMetrics(nil)
	}
	pollCfg.DisableListen = true
	return &LogicalRelay{ob: ob, pub: pub, cfg: cfg.withDefaults(), log: log, metrics: metrics, lm: lm,
		poll: NewRelay(ob, pub, pollCfg, log, metrics)}
}

// Active reports whether this instance is the one streaming the slot.
func (r *LogicalRelay) Active() bool { return r.active.Load() }

// errSlotBusy is returned by stream when another connection streams the
// slot: this instance waits to take over.
var errSlotBusy = errors.New("the replication slot is streamed by another relay")

// Run publishes until ctx is cancelled. It creates the publication and the
// slot if they are missing; when it created the slot, it first publishes
// from the table what was committed before the slot existed (a switch from
// the polling relay). It then streams, and when the stream breaks (the
// database, the broker, another relay holding the slot) it tries again.
func (r *LogicalRelay) Run(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	if err := r.poll.cfg.Validate(); err != nil {
		return err
	}
	go r.poll.statsLoop(ctx)
	go r.poll.cleanupLoop(ctx)
	go r.lagLoop(ctx)
	go r.settleLoop(ctx)
	delay := backoff.Exponential{Initial: r.cfg.TakeoverRetry, Multiplier: 2, Max: 5 * time.Second, Jitter: true}
	failures := 0
	for ctx.Err() == nil {
		err := r.setupAndStream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.cfg.TakeoverRetry
		if errors.Is(err, errSlotBusy) {
			failures = 0
		} else {
			failures++
			wait = delay.Delay(failures)
			r.log.WarnContext(ctx, "outbox logical relay stream ended; retrying", "slot", r.slotName(), "err", err, "retry_in", wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

func (r *LogicalRelay) setupAndStream(ctx context.Context) error {
	created, err := r.ensureSlot(ctx)
	if err != nil {
		return err
	}
	if created {
		r.log.InfoContext(ctx, "outbox logical relay created its slot; publishing what the table holds from before it",
			"slot", r.slotName())
		if err := r.drain(ctx); err != nil {
			// The slot exists now: the next attempt would not drain. Drop
			// it, so that it does (events committed meanwhile are in the
			// table, which the drain reads).
			if derr := r.dropSlot(context.WithoutCancel(ctx)); derr != nil {
				r.log.ErrorContext(ctx, "outbox logical relay: drain failed and the slot could not be dropped; drop it by hand",
					"slot", r.slotName(), "err", derr)
			}
			return fmt.Errorf("drain the table into the new slot: %w", err)
		}
	}
	return r.stream(ctx)
}

// isObjectInUse reports PostgreSQL's "replication slot is active" refusal.
func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}
