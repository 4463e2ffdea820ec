package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"

	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

const (
	// postingColumns are the columns of a posting as the API shows it, in
	// scanPosting's order: /lancamentos and the statement read them here,
	// and a new column of a posting is added once, here and in
	// scanPosting.
	postingColumns = `p.id, coalesce(f.transfer_id, p.entry_id), p.direction, p.amount_cents, p.balance_after_cents, p.created_at, f.refund_id`

	// postingFrom is what postingColumns read from: a refund's posting
	// shows the refunded transfer and the refund's id, found by its
	// marker (one primary-key probe per refund posting).
	postingFrom = `posting p LEFT JOIN refund f ON p.entry_type = 'REFUND' AND f.refund_id = p.entry_id`

	// balanceAtSQL is one probe of posting_account_time: per account the
	// stamps follow the running balance (migrations/ledger/00007), so the
	// last posting stamped before $2 carries the balance at $2.
	balanceAtSQL = `
SELECT coalesce((SELECT balance_after_cents FROM posting WHERE account_id = $1 AND created_at < $2
                  ORDER BY created_at DESC, id DESC LIMIT 1), 0)`

	// accountAtSQL is accountSQL with balanceAtSQL's probe: one round trip.
	accountAtSQL = `
SELECT ` + accountColumns + `,
       coalesce((SELECT p.balance_after_cents FROM posting p WHERE p.account_id = a.id AND p.created_at < $2
                  ORDER BY p.created_at DESC, p.id DESC LIMIT 1), 0)
FROM account a WHERE a.id = $1`

	// statementSQL reads the postings of [$2, $3), oldest first, along
	// posting_account_time.
	statementSQL = `SELECT ` + postingColumns + ` FROM ` + postingFrom + `
WHERE p.account_id = $1 AND p.created_at >= $2 AND p.created_at < $3
ORDER BY p.created_at, p.id`
)

// scanPosting scans a row of postingColumns.
func scanPosting(row pgx.Row) (ledger.Posting, error) {
	var (
		p      ledger.Posting
		dir    string
		refund *uuid.UUID
	)
	if err := row.Scan(&p.ID, &p.EntryID, &dir, &p.AmountCents, &p.BalanceAfterCents, &p.CreatedAt, &refund); err != nil {
		return ledger.Posting{}, fmt.Errorf("scan posting: %w", err)
	}
	p.Direction = ledger.Direction(dir)
	if refund != nil {
		p.RefundID = *refund
	}
	return p, nil
}

// BalanceAt implements ledger.Store.
func (s *Store) BalanceAt(ctx context.Context, accountID string, at time.Time) (ledger.Account, int64, error) {
	var balance int64
	a, err := postgres.ScanOne(s.db.QueryRow(ctx, accountAtSQL, accountID, at), func(row pgx.Row) (ledger.Account, error) {
		var a ledger.Account
		err := row.Scan(&a.ID, &a.Currency, &a.BalanceCents, &a.ReservedCents, &a.Holder, &a.Funding, &a.CreatedAt, &balance)
		return a, err
	}, ledger.ErrAccountNotFound, "read account "+accountID)
	if err != nil {
		return ledger.Account{}, 0, err
	}
	return a, balance, nil
}

// Statement implements ledger.Store: one REPEATABLE READ, READ ONLY
// transaction (one snapshot for both balances and the postings), the
// postings read by one query whose rows pgx hands over as they arrive.
func (s *Store) Statement(ctx context.Context, accountID string, from, to time.Time,
	begin func(opening, closing int64) error, each func(ledger.Posting) error) error {
	snapshot := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return s.db.InTxOptions(ctx, snapshot, func(tx pgx.Tx) error {
		var opening, closing int64
		b := &pgx.Batch{}
		b.Queue(balanceAtSQL, accountID, from).QueryRow(func(r pgx.Row) error { return r.Scan(&opening) })
		b.Queue(balanceAtSQL, accountID, to).QueryRow(func(r pgx.Row) error { return r.Scan(&closing) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("balances of %s: %w", accountID, err)
		}
		if err := begin(opening, closing); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, statementSQL, accountID, from, to)
		if err != nil {
			return fmt.Errorf("statement of %s: %w", accountID, err)
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanPosting(rows)
			if err != nil {
				return err
			}
			if err := each(p); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("statement of %s: %w", accountID, err)
		}
		return nil
	})
}
