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
	// insertSQL creates the entry; a concurrent insert of the same event
	// waits on the unique index until the first transaction ends.
	insertSQL = `
INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id) DO NOTHING`

	lockSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = $1
FOR UPDATE`

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

// Claim implements notify.Store. The row lock is held for the duration of
// attempt (a send, bounded by the channel's timeout), in one transaction
// that is not rerun, so attempt runs exactly once.
func (s *Store) Claim(ctx context.Context, n notify.Notification, channel string,
	attempt func(e notify.Entry) (notify.Outcome, bool)) (notify.Entry, error) {
	var out notify.Entry
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertSQL, n.EventID, n.TransferID, n.EventType, n.Account, channel); err != nil {
			return fmt.Errorf("insert notification: %w", err)
		}
		e, err := scan(tx.QueryRow(ctx, lockSQL, n.EventID))
		if err != nil {
			return fmt.Errorf("lock notification: %w", err)
		}
		o, ok := attempt(e)
		if !ok {
			out = e
			return nil
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
		out, err = scan(tx.QueryRow(ctx, recordSQL, n.EventID, string(o.Status), channel, deliveredAt, lastError))
		if err != nil {
			return fmt.Errorf("record notification: %w", err)
		}
		return nil
	})
	if err != nil {
		return notify.Entry{}, fmt.Errorf("notification log %s: %w", n.EventID, err)
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
