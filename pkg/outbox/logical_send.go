package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/postgres"
)

// walBatch is a run of committed transactions from the stream: their
// events in commit order and the end LSN of the last one, which the relay
// confirms once every event is settled. A batch without events (a
// heartbeat, a transaction of requeued rows all held back) still moves the
// position.
type walBatch struct {
	events []claimed
	// xids are the transactions that gave events: the batch is sent only
	// once each is visible (untilVisible).
	xids    []uint32
	endLSN  uint64
	oldest  time.Time // commit time of the batch's first transaction
	hasTime bool
}

// outageRetry paces the resends of events that failed for want of the
// broker: the stream waits for them, so it probes often and cheaply (one
// call, the failed events only).
var outageRetry = backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: time.Second, Jitter: true}

// sendLoop publishes the stream's batches one after the other (so per key
// in commit order) and moves the confirmed position after each. held is
// the keys held back behind a DEAD event; it is this loop's alone.
func (r *LogicalRelay) sendLoop(ctx context.Context, in <-chan walBatch, held map[topicKey]bool) error {
	for {
		var b walBatch
		select {
		case <-ctx.Done():
			return nil
		case b = <-in:
		}
		start := time.Now()
		if b.hasTime {
			oldest := b.oldest
			r.oldestUnconfirmed.Store(&oldest)
		}
		if len(b.events) > 0 {
			if err := r.untilVisible(ctx, b.xids); err != nil {
				return err
			}
			if _, err := r.publish(ctx, b.events, held); err != nil {
				return err
			}
			r.metrics.BatchSize.Observe(float64(len(b.events)))
			r.metrics.BatchDuration.Observe(time.Since(start).Seconds())
		}
		r.acked.Store(b.endLSN)
		r.oldestUnconfirmed.Store(nil)
	}
}

// publish sends batch, in order, until every event is acknowledged, DEAD,
// or held back behind a DEAD event of its key, and returns the ids the
// broker acknowledged. A broker outage is waited out; an event the broker
// refuses (or whose topic or authorization is missing) is tried
// RefusalAttempts times, alone after the first, then set DEAD. It returns
// an error only when ctx ends or the database stays unreachable for a DEAD
// mark or a hold check until then.
func (r *LogicalRelay) publish(ctx context.Context, batch []claimed, held map[topicKey]bool) ([]uuid.UUID, error) {
	pending := make([]claimed, 0, len(batch))
	for _, c := range batch {
		if c.holdOnly {
			held[topicKey{c.topic, c.key}] = true
			continue
		}
		ok, err := r.notHeld(ctx, c, held)
		if err != nil {
			return nil, err
		}
		if ok {
			pending = append(pending, c)
		}
	}
	var acked []uuid.UUID
	tries := map[uuid.UUID]int{}
	for round := 1; len(pending) > 0; round++ {
		// Events behind an isolated event of their key wait for it: send
		// sends the isolated ones after the others.
		behind := behindIsolated(pending)
		var now []claimed
		for i, c := range pending {
			if !behind[i] {
				now = append(now, c)
			}
		}
		sent := r.poll.send(ctx, now, time.Now().Add(24*time.Hour))
		results := make([]error, len(pending))
		for i, j := 0, 0; i < len(pending); i++ {
			if behind[i] {
				results[i] = errNotSent
				continue
			}
			results[i] = sent[j]
			j++
		}
		next := pending[:0:0]
		ackedAt := time.Now()
		var firstErr error
		for i, c := range pending {
			err := results[i]
			k := topicKey{c.topic, c.key}
			switch {
			case err == nil:
				acked = append(acked, c.id)
				r.metrics.Published.WithLabelValues(c.topic, c.eventType).Inc()
				r.metrics.EnqueueToAck.Observe(ackedAt.Sub(c.enqueuedAt).Seconds())
			case held[k]:
				// An older event of its key went DEAD this round: it stays
				// PENDING in the table, behind it.
			case errors.Is(err, errNotSent):
				next = append(next, c)
			case waitsForBroker(err) || ctx.Err() != nil:
				r.metrics.SendFailures.WithLabelValues(broker.Cause(err)).Inc()
				firstErr = cmpErr(firstErr, err)
				next = append(next, c)
			default:
				r.metrics.SendFailures.WithLabelValues(broker.Cause(err)).Inc()
				tries[c.id]++
				if tries[c.id] < r.cfg.RefusalAttempts {
					c.isolate = true // alone from now on: it must not fail its neighbours
					firstErr = cmpErr(firstErr, err)
					next = append(next, c)
					continue
				}
				if err := r.untilDB(ctx, func(ctx context.Context) error { return r.markDead(ctx, c, tries[c.id], err) }); err != nil {
					return acked, err
				}
				held[k] = true
				r.metrics.DeadTotal.Inc()
				r.log.ErrorContext(ctx, "outbox event is DEAD: the broker refused it; its key is held back until an operator requeues or discards it",
					"evento_id", c.id, "topic", c.topic, "evento_tipo", c.eventType, "attempts", tries[c.id], "err", err)
			}
		}
		pending = next
		if len(pending) == 0 {
			break
		}
		if ctx.Err() != nil {
			return acked, ctx.Err()
		}
		if firstErr == nil {
			continue // only events that waited behind an isolated one: at once
		}
		if round == 1 || round%20 == 0 {
			r.log.WarnContext(ctx, "outbox logical relay sends failed, retrying", "failed", len(pending),
				"cause", broker.Cause(firstErr), "err", firstErr)
		}
		select {
		case <-ctx.Done():
			return acked, ctx.Err()
		case <-time.After(outageRetry.Delay(round)):
		}
	}
	return acked, nil
}

// notHeld reports whether c may be sent: its key is not held back, or the
// DEAD event that held it is gone (requeued or discarded by an operator).
func (r *LogicalRelay) notHeld(ctx context.Context, c claimed, held map[topicKey]bool) (bool, error) {
	k := topicKey{c.topic, c.key}
	if !held[k] {
		return true, nil
	}
	var still bool
	err := r.untilDB(ctx, func(ctx context.Context) error {
		var err error
		still, err = r.keyHeld(ctx, k, c.seq)
		return err
	})
	if err != nil {
		return false, err
	}
	if still {
		r.lm.HeldBack.Inc()
		return false, nil
	}
	delete(held, k)
	return true, nil
}

// untilDB runs f until it succeeds or ctx ends: the stream cannot move past
// an event whose fate is not recorded.
func (r *LogicalRelay) untilDB(ctx context.Context, f func(context.Context) error) error {
	for round := 1; ; round++ {
		fctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		err := f(fctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if round == 1 {
			r.log.WarnContext(ctx, "outbox logical relay cannot reach the database; waiting", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(outageRetry.Delay(round)):
		}
	}
}

// behindIsolated marks the events that follow an isolated event of their
// key in batch.
func behindIsolated(batch []claimed) []bool {
	out := make([]bool, len(batch))
	var isolated map[topicKey]bool
	for i, c := range batch {
		k := topicKey{c.topic, c.key}
		if isolated[k] {
			out[i] = true
			continue
		}
		if c.isolate {
			if isolated == nil {
				isolated = map[topicKey]bool{}
			}
			isolated[k] = true
		}
	}
	return out
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}
