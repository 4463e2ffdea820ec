package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

const processedSQL = `
SELECT result, COALESCE(reason, ''), source_account, dest_account, amount_cents, currency,
       COALESCE(client_id, ''), request_event_id, processed_at
FROM processed_transfer WHERE transfer_id = $1`

// reservationSQL reads a hold's reservation for the operator's view.
const reservationSQL = `
SELECT amount_cents, expires_at, state, coalesce(captured_cents, 0), closed_at
FROM reservation WHERE transfer_id = $1`

// balancesSQL reads each side with the running balance its account had
// right after it.
const balancesSQL = `
SELECT p.account_id, p.direction, p.amount_cents, p.balance_after_cents, p.created_at
  FROM posting p WHERE p.entry_type = 'TRANSFER' AND p.entry_id = $1 ORDER BY p.direction DESC`

// Processed returns how the ledger decided transfer id with its postings,
// or ledger.ErrNotProcessed. It only reads.
func (s *Store) Processed(ctx context.Context, id uuid.UUID) (ledger.Processed, error) {
	p := ledger.Processed{TransferID: id, Postings: []ledger.PostingBalance{}}
	var outcome string
	var requestEventID *uuid.UUID
	err := s.db.QueryRow(ctx, processedSQL, id).Scan(&outcome, &p.Reason, &p.Source, &p.Destination, &p.AmountCents, &p.Currency,
		&p.ClientID, &requestEventID, &p.ProcessedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Processed{}, ledger.ErrNotProcessed
	}
	if err != nil {
		return ledger.Processed{}, fmt.Errorf("read processed transfer %s: %w", id, err)
	}
	p.Outcome = ledger.Outcome(outcome)
	if requestEventID != nil {
		p.RequestEventID = *requestEventID
	}
	if p.Outcome == ledger.Reserved {
		r := ledger.Reservation{TransferID: id, Source: p.Source, Dest: p.Destination, Currency: p.Currency}
		var state string
		var closedAt *time.Time
		if err := s.db.QueryRow(ctx, reservationSQL, id).Scan(&r.AmountCents, &r.ExpiresAt, &state, &r.CapturedCents, &closedAt); err != nil {
			return ledger.Processed{}, fmt.Errorf("read reservation of %s: %w", id, err)
		}
		r.State = ledger.ReservationState(state)
		if closedAt != nil {
			r.ClosedAt = *closedAt
		}
		p.Reservation = &r
	}
	rows, err := s.db.Query(ctx, balancesSQL, id)
	if err != nil {
		return ledger.Processed{}, fmt.Errorf("read postings of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var b ledger.PostingBalance
		var dir string
		if err := rows.Scan(&b.Account, &dir, &b.AmountCents, &b.BalanceAfter, &b.CreatedAt); err != nil {
			return ledger.Processed{}, fmt.Errorf("scan posting of %s: %w", id, err)
		}
		b.Direction = ledger.Direction(dir)
		p.Postings = append(p.Postings, b)
	}
	if err := rows.Err(); err != nil {
		return ledger.Processed{}, fmt.Errorf("read postings of %s: %w", id, err)
	}
	return p, nil
}
