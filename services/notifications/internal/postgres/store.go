// Package postgres is the notification log on PostgreSQL.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/notify"
)

var _ notify.Store = (*Store)(nil)

// Store is the notification log table.
type Store struct {
	db *pg.DB
}

// New returns the log on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

const (
	// lockSQL and unlockSQL take and give back the event's claim: a
	// session-level advisory lock, held on one connection across the send
	// but inside no transaction (no snapshot kept, no row locked). A
	// concurrent delivery of the same event waits for it; a crash releases
	// it with the connection.
	lockSQL   = `SELECT pg_advisory_lock(hashtext('notification'), hashtext($1::text))`
	unlockSQL = `SELECT pg_advisory_unlock(hashtext('notification'), hashtext($1::text))`

	// insertSQL creates the entry if there is none.
	insertSQL = `
INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id) DO NOTHING`

	readSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = $1`

	recordSQL = `
UPDATE notification
SET status = $2, channel = $3, attempts = attempts + 1, delivered_at = $4, last_error = $5, updated_at = now()
WHERE event_id = $1
RETURNING event_id, transfer_id, channel, status, attempts, delivered_at, last_error`

	getSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = $1`
)

// maxErrorLen bounds the stored error text.
const maxErrorLen = 1000

// Claim implements notify.Store in three steps, none of which keeps a
// transaction open across the send: claim (the event's advisory lock, then
// the entry created and read, each statement its own transaction), attempt
// (the send, outside any transaction), record (one UPDATE). attempt runs
// exactly once per call.
func (s *Store) Claim(ctx context.Context, n notify.Notification, channel string,
	attempt func(e notify.Entry) (notify.Outcome, bool)) (entry notify.Entry, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("notification log %s: %w", n.EventID, err)
		}
	}()
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return notify.Entry{}, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, lockSQL, n.EventID); err != nil {
		return notify.Entry{}, fmt.Errorf("claim: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, unlockSQL, n.EventID); uerr != nil {
			// A connection that may still hold the lock must not go back
			// to the pool: closing it releases the lock.
			_ = conn.Conn().Close(uctx)
		}
	}()
	if _, err := conn.Exec(ctx, insertSQL, n.EventID, n.TransferID, n.EventType, n.Account, channel); err != nil {
		return notify.Entry{}, fmt.Errorf("insert notification: %w", err)
	}
	e, err := scan(conn.QueryRow(ctx, readSQL, n.EventID))
	if err != nil {
		return notify.Entry{}, fmt.Errorf("read notification: %w", err)
	}
	o, ok := attempt(e)
	if !ok {
		return e, nil
	}
	var deliveredAt *time.Time
	if o.Status == notify.StatusDelivered {
		at := o.At.UTC()
		deliveredAt = &at
	}
	var lastError *string
	if o.Err != nil {
		msg := o.Err.Error()
		if len(msg) > maxErrorLen {
			msg = msg[:maxErrorLen]
		}
		lastError = &msg
	}
	// The outcome is recorded even if ctx ended during the send.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out, err := scan(conn.QueryRow(rctx, recordSQL, n.EventID, string(o.Status), channel, deliveredAt, lastError))
	if err != nil {
		return notify.Entry{}, fmt.Errorf("record notification: %w", err)
	}
	return out, nil
}

// Get implements notify.Store; it returns notify.ErrNotFound when the event
// has no entry.
func (s *Store) Get(ctx context.Context, eventID uuid.UUID) (notify.Entry, error) {
	e, err := scan(s.db.QueryRow(ctx, getSQL, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		return notify.Entry{}, notify.ErrNotFound
	}
	if err != nil {
		return notify.Entry{}, fmt.Errorf("get notification %s: %w", eventID, err)
	}
	return e, nil
}

func scan(row pgx.Row) (notify.Entry, error) {
	var (
		e           notify.Entry
		status      string
		deliveredAt *time.Time
		lastError   *string
	)
	if err := row.Scan(&e.EventID, &e.TransferID, &e.Channel, &status, &e.Attempts, &deliveredAt, &lastError); err != nil {
		return notify.Entry{}, err
	}
	e.Status = notify.Status(status)
	if deliveredAt != nil {
		e.DeliveredAt = *deliveredAt
	}
	if lastError != nil {
		e.LastError = *lastError
	}
	return e, nil
}
