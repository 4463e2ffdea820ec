package outbox

import (
	"context"
	"fmt"
	"time"
)

// Backlog is how far behind a relay is: what waits to be published, and
// how long the oldest of it has waited. By Little's law the age is also
// about how long a new event would wait: the backlog measured in time.
type Backlog struct {
	// Pending is the number of events not yet published (for the logical
	// relay: not yet marked PUBLISHED, so it includes what was published
	// since the last settle).
	Pending int64
	// OldestAge is how long the oldest event not yet published has
	// waited; 0 when none.
	OldestAge time.Duration
}

// BacklogReader reads a relay's backlog; *Relay and *LogicalRelay are
// ones, so that a caller (the transfers service's admission control) reads
// either mode's figure the same way.
type BacklogReader interface {
	Backlog(ctx context.Context) (Backlog, error)
}

var (
	_ BacklogReader = (*Relay)(nil)
	_ BacklogReader = (*LogicalRelay)(nil)
)

// backlogSQL reads the unpublished rows through their partial index.
const backlogSQL = `
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(enqueued_at)), 0)::float8
  FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING')`

// backlog reads the table's unpublished rows.
func (o *Outbox) backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var age float64
	if err := o.db.QueryRow(ctx, backlogSQL).Scan(&b.Pending, &age); err != nil {
		return b, fmt.Errorf("outbox backlog: %w", err)
	}
	b.OldestAge = time.Duration(age * float64(time.Second))
	return b, nil
}

// Backlog reads the polling relay's backlog from the table: the rows still
// PENDING or PROCESSING, and the age of the oldest.
func (r *Relay) Backlog(ctx context.Context) (Backlog, error) { return r.ob.backlog(ctx) }

// Backlog reads the logical relay's backlog: the age is the stream's lag
// (the commit time of the batch in the sender's hands, as the
// outbox_logical_lag_seconds gauge), since rows stay PENDING in the table
// until the next settle; the count is the table's. The age is that of the
// events this instance holds unconfirmed, streamed or drained from the
// table, across a restart of its stream; a standby instance, which holds
// none, reports 0.
func (r *LogicalRelay) Backlog(ctx context.Context) (Backlog, error) {
	b, err := r.ob.backlog(ctx)
	if err != nil {
		return b, err
	}
	b.OldestAge = 0
	if t := r.oldestUnconfirmed.Load(); t != nil && !t.IsZero() {
		b.OldestAge = max(0, time.Since(*t))
	}
	return b, nil
}
