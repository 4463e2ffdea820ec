package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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

// A DEAD event holds its key back; requeued, it keeps its place (its seq)
// and goes before the key's later events, alone (isolate stays set).
const requeueSQL = `
WITH moved AS (
    UPDATE outbox_event
       SET status = 'PENDING', attempts = 0, refusals = 0, next_attempt_at = now(),
           locked_by = NULL, locked_until = NULL, lease_owner = NULL
     WHERE status = 'DEAD'
       AND ($1::uuid IS NULL OR id = $1)
       AND ($2::text IS NULL OR topic = $2)
       AND ($3::text IS NULL OR event_type = $3)
    RETURNING id, topic, key
)
INSERT INTO outbox_audit (operator, action, event_id, topic, key, reason)
SELECT $4, 'requeue', id, topic, key, $5 FROM moved`

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
	tag, err := o.db.Exec(ctx, requeueSQL, id, nullable(f.Topic), nullable(f.Type), a.Operator, a.Reason)
	if err != nil {
		return 0, fmt.Errorf("requeue dead outbox events: %w", err)
	}
	o.Wake()
	return tag.RowsAffected(), nil
}

// A discarded event is never sent and no longer holds its key back; the row
// stays, with its payload, for the record.
const discardSQL = `
WITH dropped AS (
    UPDATE outbox_event SET status = 'DISCARDED'
     WHERE status = 'DEAD' AND id = $1
    RETURNING id, topic, key
)
INSERT INTO outbox_audit (operator, action, event_id, topic, key, reason)
SELECT $2, 'discard', id, topic, key, $3 FROM dropped`

// ErrNotDead is returned by Discard when no DEAD event has the id.
var ErrNotDead = errors.New("no DEAD outbox event has this id")

// Discard drops the DEAD event id for good, records who did it (see Audit)
// and wakes the relays: the later events of its key go on. Only DEAD events
// can be discarded, one at a time. Returns ErrNoOperator or ErrNotDead,
// having changed nothing.
func (o *Outbox) Discard(ctx context.Context, id uuid.UUID, a Audit) error {
	if a.Operator == "" {
		return ErrNoOperator
	}
	tag, err := o.db.Exec(ctx, discardSQL, id, a.Operator, a.Reason)
	if err != nil {
		return fmt.Errorf("discard dead outbox event: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotDead
	}
	o.Wake()
	return nil
}

// AuditEntry is one operator action on one event.
type AuditEntry struct {
	At       time.Time
	Operator string
	Action   string
	EventID  uuid.UUID
	Topic    string
	Key      string
	Reason   string
}

const auditSQL = `
SELECT at, operator, action, event_id, topic, key, reason FROM outbox_audit ORDER BY id DESC LIMIT $1`

// AuditLog returns up to limit operator actions, newest first.
func (o *Outbox) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	rows, err := o.db.Query(ctx, auditSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.At, &e.Operator, &e.Action, &e.EventID, &e.Topic, &e.Key, &e.Reason); err != nil {
			return nil, fmt.Errorf("scan outbox audit: %w", err)
		}
		out = append(out, e)
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
