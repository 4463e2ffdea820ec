package outbox

import (
	"context"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
)

// Waiting for the broker. A send that fails because the broker cannot be
// reached (pkg/outage.Unavailable) says nothing about the event: the same
// send succeeds unchanged once the broker is back. Such events still get
// the exponential backoff, so that a long outage costs the database little,
// but they are marked waits_for_broker, and the relay, once any of its sends
// fails that way, is waiting:
//
//   - while waiting, every poll interval, the probe makes the oldest event
//     that waits for the broker due now and wakes the workers: one real send,
//     a few events at most, tells whether the broker takes sends again;
//   - the first batch that the broker takes while waiting makes every event
//     that waits for the broker due at once (resumeSQL) and wakes every
//     relay of the database.
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

// probeLoop probes the broker through the oldest waiting event while the
// relay is waiting.
func (r *Relay) probeLoop(ctx context.Context) {
	periodic.Every(ctx, func() time.Duration { return r.jitter(r.cfg.PollInterval) }, func() {
		if !r.waiting.Load() {
			return
		}
		tag, err := r.ob.db.Exec(ctx, probeSQL)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.DebugContext(ctx, "outbox broker probe failed", "relay", r.cfg.Name, "err", err)
			}
		case tag.RowsAffected() == 0:
			r.waiting.Store(false) // nothing waits for the broker
		default:
			select { // the workers of this relay claim the probed event
			case r.ob.local <- struct{}{}:
			default:
			}
		}
	})
}

// resume makes every event that waits for the broker due now: the broker
// took a send of this relay after some had failed for want of it.
func (r *Relay) resume(ctx context.Context) {
	tag, err := r.ob.db.Exec(ctx, resumeSQL)
	if err != nil {
		r.waiting.Store(true) // the probe carries on, one event at a time
		r.log.WarnContext(ctx, "outbox: the broker is back, but the events that waited for it could not be made due; the probe carries on",
			"relay", r.cfg.Name, "err", err)
		return
	}
	if n := tag.RowsAffected(); n > 0 {
		r.log.InfoContext(ctx, "outbox: the broker takes sends again; the events that waited for it are due now",
			"relay", r.cfg.Name, "records", n)
		r.ob.Wake()
	}
}
