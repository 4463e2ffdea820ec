package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

const (
	reservationColumns = `r.transfer_id, r.source_account, r.dest_account, r.currency, r.amount_cents, r.expires_at, r.state,
       coalesce(r.captured_cents, 0), coalesce(m.client_id, ''), m.request_event_id`

	// lockReservationsSQL locks the reservations of a batch of commands in
	// transfer-id order, so that two batches wait for each other in one
	// order; a concurrent closing that committed first is seen closed.
	lockReservationsSQL = `
SELECT ` + reservationColumns + `
FROM reservation r JOIN processed_transfer m ON m.transfer_id = r.transfer_id
WHERE r.transfer_id = ANY($1::uuid[])
ORDER BY r.transfer_id
FOR UPDATE OF r`

	// lockHoldAccountsSQL locks, after lockReservationsSQL in the same
	// transaction, the accounts of the reservations that are still open
	// (this statement's snapshot sees every closing committed before the
	// reservations' locks were granted): a closed reservation moves no
	// account.
	lockHoldAccountsSQL = `
SELECT id, currency, balance_cents, reserved_cents, coalesce(holder, ''), funding FROM account
WHERE id = ANY(ARRAY(SELECT unnest(ARRAY[source_account, dest_account]) FROM reservation
                     WHERE transfer_id = ANY($1::uuid[]) AND state = 'open'))
ORDER BY id
FOR UPDATE`

	// lockDueSQL locks up to $2 open reservations whose expiry is at or
	// before $1, oldest first, skipping any that another transaction holds:
	// concurrent sweeps take disjoint sets, and a reservation a capture or
	// cancellation holds is left to it.
	lockDueSQL = `
WITH due AS (
    SELECT transfer_id FROM reservation
    WHERE state = 'open' AND expires_at <= $1
    ORDER BY expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
SELECT ` + reservationColumns + `
FROM due JOIN reservation r ON r.transfer_id = due.transfer_id JOIN processed_transfer m ON m.transfer_id = r.transfer_id
ORDER BY r.transfer_id`

	// closeSQL writes the postings of the captures (with their running
	// balances), the balances and reservations of the accounts moved, and
	// the closed reservations ($9-$14), in one statement.
	closeSQL = postingsAndBalances + `
UPDATE reservation AS r
SET state = c.state, captured_cents = NULLIF(c.captured, 0),
    closed_by = NULLIF(c.closed_by, '00000000-0000-0000-0000-000000000000'), closed_event_id = c.event_id, closed_at = c.at
FROM unnest($9::uuid[], $10::text[], $11::bigint[], $12::uuid[], $13::uuid[], $14::timestamptz[])
     AS c(id, state, captured, closed_by, event_id, at)
WHERE r.transfer_id = ANY($9::uuid[]) AND r.transfer_id = c.id`
)

// CloseReservations implements ledger.Store.
//
// Round trips: begin; lock the reservations and their accounts
// (pipelined, the reservations first); enqueue the closing events and
// write postings, balances and reservations (pipelined, the writes in one
// statement); commit: as many as a settlement.
func (s *Store) CloseReservations(ctx context.Context, cs []ledger.Command, close ledger.Closer) ([]ledger.Result, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	ids := make([][16]byte, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, [16]byte(c.TransferID))
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	var results []ledger.Result
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(postgres.GenericPlanSQL)
		b.Queue(lockReservationsSQL, ids)
		b.Queue(lockHoldAccountsSQL, ids)
		held, accounts, err := lockReservations(ctx, tx, b)
		if err != nil {
			return err
		}
		results, err = s.close(ctx, tx, cs, held, accounts, close)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// ExpireDue implements ledger.Store. Round trips: begin; lock the due
// reservations; lock their accounts; write; commit.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int, close ledger.Closer) ([]ledger.Result, error) {
	var results []ledger.Result
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		results = nil
		b := &pgx.Batch{}
		b.Queue(postgres.GenericPlanSQL)
		b.Queue(lockDueSQL, now, limit)
		held, _, err := lockReservations(ctx, tx, b)
		if err != nil || len(held) == 0 {
			return err
		}
		cs := make([]ledger.Command, 0, len(held))
		var accountIDs []string
		for id, r := range held {
			cs = append(cs, ledger.Command{Kind: ledger.Expire, TransferID: id})
			accountIDs = append(accountIDs, r.Source, r.Dest)
		}
		slices.SortFunc(cs, func(a, b ledger.Command) int { return slices.Compare(a.TransferID[:], b.TransferID[:]) })
		accounts, err := readLocked(tx.Query(ctx, lockAccountsSQL, accountIDs))
		if err != nil {
			return err
		}
		results, err = s.close(ctx, tx, cs, held, accounts, close)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// close is the body of a closing transaction once the reservations and
// their accounts are locked: it decides each command with close and
// writes what the closings did. It builds all of its state afresh, since
// InTx may run it again.
func (s *Store) close(ctx context.Context, tx pgx.Tx, cs []ledger.Command, held map[uuid.UUID]*ledger.Reservation,
	accounts map[string]*ledger.Account, close ledger.Closer) ([]ledger.Result, error) {
	results := make([]ledger.Result, len(cs))
	var (
		m                  = newMoves(accounts)
		cIDs, cBy, cEvents [][16]byte
		cStates            []string
		cCaptured          []int64
		cAt                []time.Time
	)
	for i, c := range cs {
		r := held[c.TransferID] // nil: not reserved
		var source, dest *ledger.Account
		if r != nil {
			source, dest = accounts[r.Source], accounts[r.Dest]
		}
		cl, err := close(r, source, dest, c)
		if err != nil {
			return nil, err
		}
		results[i] = cl.Result
		if cl.Outcome == ledger.AlreadyClosed {
			continue
		}
		m.add(c.TransferID, cl.Entries, cl.Event)
		m.moved[r.Source] = true
		cIDs, cBy, cEvents = append(cIDs, [16]byte(r.TransferID)), append(cBy, [16]byte(r.ClosedBy)), append(cEvents, [16]byte(r.ClosedEventID))
		cStates, cCaptured, cAt = append(cStates, string(r.State)), append(cCaptured, r.CapturedCents), append(cAt, r.ClosedAt)
	}
	if len(m.events) == 0 {
		return results, nil // every command found its reservation closed
	}
	if err := s.write(ctx, tx, accounts, m, "closed reservations", closeSQL, cIDs, cStates, cCaptured, cBy, cEvents, cAt); err != nil {
		return nil, err
	}
	return results, nil
}

// lockReservations sends b, which holds the plan setting, a statement
// that locks reservations and, when it holds a third, one that locks their
// accounts, and reads what they locked.
func lockReservations(ctx context.Context, tx pgx.Tx, b *pgx.Batch) (map[uuid.UUID]*ledger.Reservation, map[string]*ledger.Account, error) {
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	var (
		held     map[uuid.UUID]*ledger.Reservation
		accounts map[string]*ledger.Account
	)
	if err == nil {
		held, err = readReservations(br.Query())
	}
	if err == nil && b.Len() > 2 {
		accounts, err = readLocked(br.Query())
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lock reservations: %w", err)
	}
	return held, accounts, nil
}

// readReservations reads the locked reservations of rows, by transfer id.
func readReservations(rows pgx.Rows, err error) (map[uuid.UUID]*ledger.Reservation, error) {
	if err != nil {
		return nil, fmt.Errorf("lock reservations: %w", err)
	}
	defer rows.Close()
	held := map[uuid.UUID]*ledger.Reservation{}
	for rows.Next() {
		var (
			r              ledger.Reservation
			state          string
			requestEventID *uuid.UUID
		)
		if err := rows.Scan(&r.TransferID, &r.Source, &r.Dest, &r.Currency, &r.AmountCents, &r.ExpiresAt, &state,
			&r.CapturedCents, &r.ClientID, &requestEventID); err != nil {
			return nil, fmt.Errorf("scan reservation: %w", err)
		}
		r.State = ledger.ReservationState(state)
		if requestEventID != nil {
			r.RequestEventID = *requestEventID
		}
		held[r.TransferID] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock reservations: %w", err)
	}
	return held, nil
}
