package outbox

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// Waiting for the broker. A send that fails because the broker cannot be
// reached (waitsForBroker: an outage of the path to the broker or of its
// leadership) says nothing about the event: the same
// send succeeds unchanged once the broker is back. Such events still get
// the exponential backoff, so that a long outage costs the database little,
// but they are marked waits_for_broker, and the relay, once any of its sends
// fails that way, is waiting:
//
//   - while waiting, every poll interval, the probe makes the oldest event
//     that waits for the broker due now and wakes the workers: one real send,
//     a few events at most, tells whether the broker takes sends again;
//   - the first batch that the broker takes whole while waiting makes every
//     event that waits for the broker due at once (resumeSQL) and wakes
//     every relay of the database; resumes are at most one per poll
//     interval, so a partition without a leader beside working ones is
//     retried at the probe's pace.
//
// So the flow resumes about a poll interval after the broker is back,
// whatever the backoff the outage had built up (the chaos test's broker
// restart: 4.3 s from the broker answering to the first transfer settled,
// when each account's oldest event waited out its own delay of up to 16 s,
// with 30 accounts). Failures that are not outages (a refusal of the record,
// a missing ACL, an unknown topic) keep their backoff. A relay starts
// waiting, so that events a previous process left waiting are probed at
// once; a probe that finds none stops waiting.

// probeSQL makes the oldest event that waits for the broker and that nothing
// but a lease can hold back due now: no older event of its key waits for
// anything else (a retry of another kind, an operator's decision on a DEAD
// one), so a claim takes it.
const probeSQL = `
UPDATE outbox_event SET next_attempt_at = LEAST(next_attempt_at, statement_timestamp())
 WHERE id = (SELECT w.id FROM outbox_event w
              WHERE w.status = 'PENDING' AND w.attempts > 0 AND w.waits_for_broker
                AND NOT EXISTS (
                    SELECT FROM outbox_event o
                     WHERE o.topic = w.topic AND o.key = w.key AND o.seq < w.seq
                       AND ((o.status = 'PENDING' AND o.attempts > 0 AND NOT o.waits_for_broker)
                         OR o.status = 'DEAD'))
              ORDER BY w.seq
              LIMIT 1)
   AND status = 'PENDING'`

// resumeSQL makes every event that waits for the broker due now.
const resumeSQL = `
UPDATE outbox_event SET next_attempt_at = statement_timestamp()
 WHERE status = 'PENDING' AND attempts > 0 AND waits_for_broker
   AND next_attempt_at > statement_timestamp()`

// waitState tells whether a relay is waiting for the broker. Each batch
// with a send that failed for want of the broker counts as one failure,
// once its rows are committed; the relay waits while failures are counted
// that no later statement has found resolved. A statement that finds none
// left (a probe) or makes them all due (a resume) resolves exactly the
// failures counted before it began, since its snapshot holds their rows:
// a failure committed while it runs keeps the relay waiting. (A flag set by
// a failure and cleared by a probe that started before it would lose that
// failure's rows to their backoff.)
type waitState struct {
	failures atomic.Uint64 // batches that failed for want of the broker
	resolved atomic.Uint64 // failures known resolved
	// lastResume is when the last resume ran (UnixNano): resumes are at
	// most one per poll interval, so that while one partition has no
	// leader and the others take sends, its events are retried at the
	// probe's pace, not after every batch of the others.
	lastResume atomic.Int64
}

// resumeDue reports whether a resume may run now, and claims it if so.
func (w *waitState) resumeDue(now time.Time, every time.Duration) bool {
	last := w.lastResume.Load()
	return now.UnixNano()-last >= int64(every) && w.lastResume.CompareAndSwap(last, now.UnixNano())
}

// failed counts a failure whose rows are committed.
func (w *waitState) failed() { w.failures.Add(1) }

// begin returns the failures a statement starting now can see.
func (w *waitState) begin() uint64 { return w.failures.Load() }

// waitingAt reports whether failures counted up to seen are unresolved.
func (w *waitState) waitingAt(seen uint64) bool { return seen > w.resolved.Load() }

// waiting reports whether any counted failure is unresolved.
func (w *waitState) waiting() bool { return w.waitingAt(w.begin()) }

// settle records that the failures counted up to seen are resolved.
func (w *waitState) settle(seen uint64) {
	for {
		cur := w.resolved.Load()
		if seen <= cur || w.resolved.CompareAndSwap(cur, seen) {
			return
		}
	}
}

// probeLoop probes the broker through the oldest waiting event while the
// relay is waiting. Each probe is bounded (postgres.CallTimeout): on a hung
// server it fails and the next one reconnects.
func (r *Relay) probeLoop(ctx context.Context) {
	periodic.Every(ctx, func() time.Duration { return r.jitter(r.cfg.PollInterval) }, func() {
		seen := r.wait.begin()
		if !r.wait.waitingAt(seen) {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		tag, err := r.ob.db.Exec(pctx, probeSQL)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.DebugContext(ctx, "outbox broker probe failed", "relay", r.cfg.Name, "err", err)
			}
		case tag.RowsAffected() == 0:
			r.wait.settle(seen) // nothing waits for the broker
		default:
			r.signal() // a worker of this relay claims the probed event
		}
	})
}

// resume makes every event that waits for the broker due now, if any
// failure is unresolved: the broker took a send of this relay. The
// statement is bounded (postgres.CallTimeout); a failed one leaves the
// events to the probe.
func (r *Relay) resume(ctx context.Context) {
	seen := r.wait.begin()
	if !r.wait.waitingAt(seen) || !r.wait.resumeDue(time.Now(), r.cfg.PollInterval) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	tag, err := r.ob.db.Exec(rctx, resumeSQL)
	cancel()
	if err != nil {
		r.log.WarnContext(ctx, "outbox: the broker is back, but the events that waited for it could not be made due; the probe carries on",
			"relay", r.cfg.Name, "err", err)
		return
	}
	r.wait.settle(seen)
	if n := tag.RowsAffected(); n > 0 {
		r.log.InfoContext(ctx, "outbox: the broker takes sends again; the events that waited for it are due now",
			"relay", r.cfg.Name, "records", n)
		r.ob.Wake()
	}
}
