package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/services/notifications/internal/notify"
)

const recordsSQL = `
SELECT event_id, event_type, channel, status, attempts, delivered_at, COALESCE(last_error, ''), created_at, updated_at
  FROM notification WHERE transfer_id = $1 ORDER BY created_at LIMIT 20`

const attemptsSQL = `
SELECT event_id, attempt, channel, topic, outcome, COALESCE(error, ''), at
  FROM notification_attempt WHERE transfer_id = $1 ORDER BY event_id, attempt LIMIT 200`

// Records returns the notifications of transfer id (at most 20, oldest
// first) with their attempts (at most 200 in all). It only reads.
func (s *Store) Records(ctx context.Context, id uuid.UUID) ([]notify.Record, error) {
	rows, err := s.db.Query(ctx, recordsSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read notifications of %s: %w", id, err)
	}
	defer rows.Close()
	out := []notify.Record{}
	for rows.Next() {
		n := notify.Record{Entry: notify.Entry{TransferID: id}, History: []notify.AttemptRecord{}}
		var status string
		var delivered *time.Time
		if err := rows.Scan(&n.EventID, &n.EventType, &n.Channel, &status, &n.Attempts, &delivered, &n.LastError,
			&n.CreatedAt, &n.UpdatedAt); err != nil {
			return nil, fmt.Errorf("scan notification of %s: %w", id, err)
		}
		n.Status = notify.Status(status)
		if delivered != nil {
			n.DeliveredAt = *delivered
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read notifications of %s: %w", id, err)
	}
	if err := s.addAttempts(ctx, id, out); err != nil {
		return nil, err
	}
	return out, nil
}

// addAttempts fills the History of ns, the notifications of transfer id.
func (s *Store) addAttempts(ctx context.Context, id uuid.UUID, ns []notify.Record) error {
	byEvent := make(map[uuid.UUID]*notify.Record, len(ns))
	for i := range ns {
		byEvent[ns[i].EventID] = &ns[i]
	}
	rows, err := s.db.Query(ctx, attemptsSQL, id)
	if err != nil {
		return fmt.Errorf("read attempts of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var event uuid.UUID
		var a notify.AttemptRecord
		if err := rows.Scan(&event, &a.Attempt, &a.Channel, &a.Topic, &a.Outcome, &a.Error, &a.At); err != nil {
			return fmt.Errorf("scan attempt of %s: %w", id, err)
		}
		if n, ok := byEvent[event]; ok {
			n.History = append(n.History, a)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read attempts of %s: %w", id, err)
	}
	return nil
}
