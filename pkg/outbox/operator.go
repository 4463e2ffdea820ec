package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DeadEvent is an event that went DEAD, for operators.
type DeadEvent struct {
	ID         uuid.UUID
	Topic      string
	Key        string
	Type       string
	Attempts   int
	Refusals   int
	LastError  string
	EnqueuedAt time.Time
}

const listDeadSQL = `
SELECT id, topic, key, event_type, attempts, refusals, COALESCE(last_error, ''), enqueued_at
  FROM outbox_event WHERE status = 'DEAD' ORDER BY seq LIMIT $1`

// ListDead returns up to limit DEAD events, oldest first.
func (o *Outbox) ListDead(ctx context.Context, limit int) ([]DeadEvent, error) {
	rows, err := o.db.Query(ctx, listDeadSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead outbox events: %w", err)
	}
	defer rows.Close()
	var out []DeadEvent
	for rows.Next() {
		var d DeadEvent
		if err := rows.Scan(&d.ID, &d.Topic, &d.Key, &d.Type, &d.Attempts, &d.Refusals, &d.LastError, &d.EnqueuedAt); err != nil {
			return nil, fmt.Errorf("scan dead outbox event: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Audit says who performs an operator action, and why. Each action writes
// one outbox_audit row per event it changed (with the time), in the same
// transaction as the change.
type Audit struct {
	// Operator names the person or tool; required.
	Operator string
	// Reason is free text, e.g. a ticket.
	Reason string
}

// ErrNoOperator is returned by Requeue and Discard without an operator.
var ErrNoOperator = errors.New("an operator action needs the operator's name")

// deadSQL locks the DEAD events an operator action names, oldest first.
const deadSQL = `
SELECT id, topic, key, seq FROM outbox_event
 WHERE status = 'DEAD'
   AND ($1::uuid IS NULL OR id = $1)
   AND ($2::text IS NULL OR topic = $2)
   AND ($3::text IS NULL OR event_type = $3)
 ORDER BY seq FOR UPDATE`

// reinsertSQL moves the unpublished events of a key from seq $3 on (the
// DEAD event an operator acts on, $4, and the events it held back) to the
// end of the queue, in their order, by deleting and inserting them again:
// an insert reaches both relays, where an UPDATE would not reach the
// logical one (its publication carries inserts only). The event ids stay,
// so consumers still deduplicate them. The requeued event ($5 true) starts
// again as PENDING with a fresh budget, alone (isolate set); a discarded
// one is not moved.
const reinsertSQL = `
WITH moved AS (
    DELETE FROM outbox_event
     WHERE topic = $1 AND key = $2 AND seq >= $3
       AND (status IN ('PENDING', 'DEAD') AND (id <> $4 OR $5))
    RETURNING *
)
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at,
                          enqueued_at, status, attempts, refusals, last_error, isolate)
SELECT id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at, enqueued_at,
       CASE WHEN id = $4 THEN 'PENDING' ELSE status END,
       CASE WHEN id = $4 THEN 0 ELSE attempts END,
       CASE WHEN id = $4 THEN 0 ELSE refusals END,
       last_error, isolate OR id = $4
  FROM moved ORDER BY seq`

const auditInsertSQL = `
INSERT INTO outbox_audit (operator, action, event_id, topic, key, reason) VALUES ($1, $2, $3, $4, $5, $6)`

const discardSQL = `UPDATE outbox_event SET status = 'DISCARDED' WHERE id = $1 AND status = 'DEAD'`

// RequeueFilter chooses DEAD events to requeue; empty fields match all, but
// at least one must be set.
type RequeueFilter struct {
	ID    uuid.UUID
	Topic string
	Type  string
}

// ErrEmptyFilter is returned by Requeue when the filter names nothing.
var ErrEmptyFilter = fmt.Errorf("requeue needs an id, a topic or a type")

// Requeue moves the DEAD events matching f back to PENDING with a fresh
// budget, records who did it (see Audit), and wakes the relays. It returns
// how many it moved. Returns ErrEmptyFilter or ErrNoOperator, having
// changed nothing, for an empty filter or operator.
func (o *Outbox) Requeue(ctx context.Context, f RequeueFilter, a Audit) (int64, error) {
	if f.ID == uuid.Nil && f.Topic == "" && f.Type == "" {
		return 0, ErrEmptyFilter
	}
	if a.Operator == "" {
		return 0, ErrNoOperator
	}
	var id *uuid.UUID
	if f.ID != uuid.Nil {
		id = &f.ID
	}
	var n int64
	err := o.db.InTx(ctx, func(tx pgx.Tx) error {
		n = 0
		dead, err := lockDead(ctx, tx, id, nullable(f.Topic), nullable(f.Type))
		if err != nil {
			return err
		}
		for _, d := range dead {
			if _, err := tx.Exec(ctx, reinsertSQL, d.topic, d.key, d.seq, d.id, true); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, auditInsertSQL, a.Operator, "requeue", d.id, d.topic, d.key, a.Reason); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue dead outbox events: %w", err)
	}
	o.Wake()
	return n, nil
}

// ErrNotDead is returned by Discard when no DEAD event has the id.
var ErrNotDead = errors.New("no DEAD outbox event has this id")

// Discard drops the DEAD event id for good (its row stays, DISCARDED, with
// its payload, for the record), records who did it (see Audit) and wakes the
// relays: the later events of its key go on. Only DEAD events can be
// discarded, one at a time. Returns ErrNoOperator or ErrNotDead, having
// changed nothing.
func (o *Outbox) Discard(ctx context.Context, id uuid.UUID, a Audit) error {
	if a.Operator == "" {
		return ErrNoOperator
	}
	err := o.db.InTx(ctx, func(tx pgx.Tx) error {
		dead, err := lockDead(ctx, tx, &id, nil, nil)
		if err != nil {
			return err
		}
		if len(dead) == 0 {
			return ErrNotDead
		}
		d := dead[0]
		if _, err := tx.Exec(ctx, discardSQL, d.id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, reinsertSQL, d.topic, d.key, d.seq, d.id, false); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, auditInsertSQL, a.Operator, "discard", d.id, d.topic, d.key, a.Reason)
		return err
	})
	if errors.Is(err, ErrNotDead) {
		return err
	}
	if err != nil {
		return fmt.Errorf("discard dead outbox event: %w", err)
	}
	o.Wake()
	return nil
}

type deadRow struct {
	id         uuid.UUID
	topic, key string
	seq        int64
}

func lockDead(ctx context.Context, tx pgx.Tx, id *uuid.UUID, topic, typ *string) ([]deadRow, error) {
	rows, err := tx.Query(ctx, deadSQL, id, topic, typ)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []deadRow
	for rows.Next() {
		var d deadRow
		if err := rows.Scan(&d.id, &d.topic, &d.key, &d.seq); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// EventInfo is one outbox event of an aggregate, for operators following
// it: where it stands and when it was published.
type EventInfo struct {
	ID          uuid.UUID
	Topic       string
	Key         string
	Type        string
	Status      string
	Attempts    int
	LastError   string
	EnqueuedAt  time.Time
	PublishedAt *time.Time
	// Traceparent is the W3C trace context the event carries, when the
	// request that caused it was traced.
	Traceparent string
}

const eventsOfSQL = `
SELECT id, topic, key, event_type, status, attempts, COALESCE(last_error, ''), enqueued_at, published_at,
       COALESCE(headers->>'traceparent', '')
  FROM outbox_event WHERE aggregate_id = $1 ORDER BY seq LIMIT 100`

// EventsOf returns the events of one aggregate (a transfer id in every
// service of the suite), oldest first, at most 100. Published events are
// deleted after the retention period, so an old aggregate may have none.
func (o *Outbox) EventsOf(ctx context.Context, aggregateID string) ([]EventInfo, error) {
	rows, err := o.db.Query(ctx, eventsOfSQL, aggregateID)
	if err != nil {
		return nil, fmt.Errorf("outbox events of %s: %w", aggregateID, err)
	}
	defer rows.Close()
	out := []EventInfo{}
	for rows.Next() {
		var e EventInfo
		if err := rows.Scan(&e.ID, &e.Topic, &e.Key, &e.Type, &e.Status, &e.Attempts, &e.LastError, &e.EnqueuedAt, &e.PublishedAt, &e.Traceparent); err != nil {
			return nil, fmt.Errorf("scan outbox event: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
