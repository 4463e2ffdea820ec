package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/outage"
	"github.com/paysuite/payments/pkg/postgres"
)

// publishedSQL, failedSQL and releaseSQL join the ids as a table: an index
// probe per id, where the planner may serve "id = ANY(array)" as an AND of
// bitmaps over every unpublished and every leased row. Each only touches rows the
// claim ($2, $5) still leases: another claim's rows, even of the same relay,
// are never touched.
const publishedSQL = `
UPDATE outbox_event AS o
   SET status = 'PUBLISHED', published_at = now(), locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[]) AS p(id)
 WHERE o.id = p.id AND o.status = 'PROCESSING' AND o.locked_by = $2`

// failedSQL records failed sends: every failure adds to attempts (which
// paces the backoff); only the broker's refusals of the record add to
// refusals, and only refusals turn an event DEAD. A failure that says the
// broker could not be reached marks the event as waiting for the broker
// (waiting.go).
const failedSQL = `
UPDATE outbox_event AS o
   SET status = CASE WHEN f.dead THEN 'DEAD' ELSE 'PENDING' END,
       attempts = o.attempts + 1,
       refusals = o.refusals + CASE WHEN f.refused THEN 1 ELSE 0 END,
       next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
       last_error = f.err,
       isolate = o.isolate OR f.refused,
       waits_for_broker = f.outage,
       locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::bool[], $6::bool[], $7::bool[]) AS f(id, delay_ms, err, dead, refused, outage)
 WHERE o.id = f.id AND o.status = 'PROCESSING' AND o.locked_by = $5`

// asyncCommitSQL makes the commit of the transaction it runs in return
// without waiting for its WAL to reach disk (or a synchronous standby). The
// relay's own writes (a claim's leases, the marks PUBLISHED, a retry's
// schedule, a release) take it: each is bookkeeping that a crash or a
// failover may lose without losing or doubling an event's effect. A lost
// lease or mark leaves the event PENDING or leased to a claim no live relay
// holds, so it is sent again: a second copy, which every consumer drops by
// its event id, as it drops the copy a relay that died between its send and
// its mark leaves. The leases still exclude other claims at once: a commit
// is visible when it returns, durable or not. The events themselves are
// written by the business transactions, which keep the server's
// synchronous_commit. The WAL of these commits reaches disk with the next
// durable commit or the WAL writer's next round (wal_writer_delay), and
// each one saves a transfer's hop a wait for the disk: the claim's on the
// way to the broker, the mark's beside it.
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// execAsync runs sql in a transaction of its own whose commit does not wait
// for the disk (asyncCommitSQL): both statements in one round trip, a pgx
// batch running as one implicit transaction.
func (r *Relay) execAsync(ctx context.Context, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(asyncCommitSQL)
	b.Queue(sql, args...)
	br := r.ob.db.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	// Close reports the implicit commit's outcome.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errNotSent is the result of an event the claim leased but did not send:
// held back behind an older event of its key that failed in the same batch,
// or left when the batch ran out of lease. It goes back to the queue as it
// was: not an attempt.
var errNotSent = errors.New("not sent")

// record marks acked events PUBLISHED, gives back the unsent ones and
// schedules the failed ones. The updates only touch rows this claim still
// leases: if the lease ended and another relay took the event over, that
// relay records the outcome.
func (r *Relay) record(ctx context.Context, batch []claimed, results []error, token string) error {
	var ok []uuid.UUID
	var unsent []claimed
	var failIDs []uuid.UUID
	var delays []int64
	var errs []string
	var dead, refused, outages []bool
	var firstErr error
	var firstID uuid.UUID
	var firstAttempts int
	now := time.Now()
	for i, c := range batch {
		err := results[i]
		switch {
		case err == nil:
			ok = append(ok, c.id)
			r.metrics.Published.WithLabelValues(c.topic, c.eventType).Inc()
			r.metrics.EnqueueToAck.Observe(now.Sub(c.enqueuedAt).Seconds())
			continue
		case errors.Is(err, errNotSent):
			unsent = append(unsent, c)
			continue
		}
		ref := broker.Refused(err)
		unavailable := waitsForBroker(err)
		attempts := c.attempts + 1
		isDead := ref && c.refusals+1 >= r.cfg.MaxAttempts
		failIDs = append(failIDs, c.id)
		delays = append(delays, r.backoff(attempts).Milliseconds())
		errs = append(errs, truncate(err.Error(), 2000))
		dead = append(dead, isDead)
		refused = append(refused, ref)
		outages = append(outages, unavailable)
		r.metrics.SendFailures.WithLabelValues(broker.Cause(err)).Inc()
		if isDead {
			r.metrics.DeadTotal.Inc()
			r.log.ErrorContext(ctx, "outbox event is DEAD: the broker refused it for good; its key is held back until an operator requeues or discards it",
				"evento_id", c.id, "topic", c.topic, "evento_tipo", c.eventType, "refusals", c.refusals+1, "err", err)
		} else if firstErr == nil {
			firstErr, firstID, firstAttempts = err, c.id, attempts
		}
	}
	if firstErr != nil {
		// One line per batch: an outage fails every event of every batch.
		r.log.WarnContext(ctx, "outbox sends failed, will retry", "failed", len(failIDs), "of", len(batch),
			"cause", broker.Cause(firstErr), "first_evento_id", firstID, "attempts", firstAttempts, "err", firstErr)
	}
	// Fresh context: the marks must land even if the send used up ctx.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postgres.CallTimeout)
	defer cancel()
	if len(ok) > 0 {
		if err := r.execAsync(mctx, publishedSQL, ok, token); err != nil {
			// The events stay PROCESSING; after the lease they are sent
			// again: a duplicate, never a loss.
			return fmt.Errorf("mark %d outbox events published: %w", len(ok), err)
		}
	}
	if len(failIDs) > 0 {
		if err := r.execAsync(mctx, failedSQL, failIDs, delays, errs, dead, token, refused, outages); err != nil {
			return fmt.Errorf("schedule %d outbox retries: %w", len(failIDs), err)
		}
	}
	switch {
	case slices.Contains(outages, true):
		r.wait.failed() // also when some sends went through: a partition without a leader
	case len(ok) > 0:
		r.resume(mctx)
	}
	return r.release(mctx, unsent, token)
}

// waitsForBroker reports whether a failed send waits for the broker to be
// reachable again (waiting.go): an outage (outage.Unavailable) of the path
// to the broker or of its leadership, and not a cause that names the record
// or an operator's fix (a refusal, authorization, an unknown topic, the
// broker's unknown error), some of which the client also calls retriable.
func waitsForBroker(err error) bool {
	switch broker.Cause(err) {
	case broker.CauseBroker, broker.CauseNetwork, broker.CauseTimeout, broker.CauseOther:
		return outage.Unavailable(err)
	}
	return false
}

// backoff is the delay before attempt+1: exponential from BackoffBase,
// capped at BackoffMax, with equal jitter.
func (r *Relay) backoff(attempts int) time.Duration {
	return backoff.Exponential{Initial: r.cfg.BackoffBase, Multiplier: 2, Max: r.cfg.BackoffMax, Jitter: true}.Delay(attempts)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
