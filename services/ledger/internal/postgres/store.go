// Package postgres is the ledger's PostgreSQL store: accounts, postings,
// processed-transfer markers and deposits, and the settlement transaction
// that writes them with the result events in the outbox.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

var _ ledger.Store = (*Store)(nil)

// Store is the ledger's store on PostgreSQL.
type Store struct {
	db     *postgres.DB
	outbox *outbox.Outbox
}

// New returns the store on db, enqueuing the result events that settlements
// are given in ob.
func New(db *postgres.DB, ob *outbox.Outbox) *Store {
	return &Store{db: db, outbox: ob}
}

const (
	ensureFundingSQL = `
INSERT INTO account (id, currency, funding) VALUES ('__FUNDING__' || $1, $1, true)
ON CONFLICT (id) DO NOTHING`

	createAccountSQL = `
INSERT INTO account (id, currency, holder) VALUES ($1, $2, $3)
ON CONFLICT (id) DO NOTHING
RETURNING ` + accountColumns

	accountColumns = `id, currency, balance_cents, reserved_cents, coalesce(holder, ''), funding, created_at`

	accountSQL = `SELECT ` + accountColumns + ` FROM account WHERE id = $1`

	// claimHolderSQL gives a titular to an account opened before ownership
	// existed; a titular, once set, never changes (a trigger enforces it).
	claimHolderSQL = `
UPDATE account SET holder = $2 WHERE id = $1 AND holder IS NULL AND NOT funding
RETURNING ` + accountColumns

	insertDepositSQL = `
INSERT INTO deposit (id, account_id, currency, amount_cents, balance_after_cents, client_id, request_id)
VALUES ($1, $2, $3, $4, 0, $5, nullif($6, ''))
ON CONFLICT (id) DO NOTHING`

	depositColumns = `id, account_id, currency, amount_cents, balance_after_cents, coalesce(client_id, ''), coalesce(request_id, ''), created_at`

	depositSQL = `SELECT ` + depositColumns + ` FROM deposit WHERE id = $1`

	depositsSQL = `SELECT ` + depositColumns + ` FROM deposit ORDER BY created_at DESC, id DESC LIMIT $1`

	// countDepositSQL adds $3 cents to the deposits of client $1 in
	// currency $2 on this transaction's UTC day, unless the total would
	// pass $4: no row comes back then. The counter row's lock (the
	// insert's, or the update's) holds every other deposit of that
	// client, currency and day until this transaction ends, so concurrent
	// deposits are counted one after the other.
	countDepositSQL = `
INSERT INTO deposit_daily (client_id, currency, day, total_cents)
SELECT $1, $2, (now() AT TIME ZONE 'UTC')::date, $3::bigint WHERE $3::bigint <= $4::bigint
ON CONFLICT (client_id, currency, day) DO UPDATE
SET total_cents = deposit_daily.total_cents + EXCLUDED.total_cents
WHERE deposit_daily.total_cents + EXCLUDED.total_cents <= $4::bigint
RETURNING total_cents`

	lockAccountsSQL = `
SELECT id, currency, balance_cents, reserved_cents, coalesce(holder, ''), funding FROM account
WHERE id = ANY($1::text[])
ORDER BY id
FOR UPDATE`

	// depositPostingsSQL writes a deposit's two postings with the running
	// balances after them ($5 the funding account's, $6 the account's),
	// stamped with the clock read after the locks, as settlements are.
	depositPostingsSQL = `
INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents, balance_after_cents, created_at)
SELECT 'DEPOSIT', $1, x.account_id, x.direction, $4, x.after, (SELECT clock_timestamp())
FROM (VALUES (1, $2::text, 'D', $5::bigint), (2, $3::text, 'C', $6::bigint)) AS x(k, account_id, direction, after)
ORDER BY x.k`

	creditSQL = `UPDATE account SET balance_cents = balance_cents + $2 WHERE id = $1 RETURNING balance_cents`

	finishDepositSQL = `
UPDATE deposit SET balance_after_cents = $2 WHERE id = $1 RETURNING created_at`

	postingsSQL = `SELECT ` + postingColumns + ` FROM ` + postingFrom + `
WHERE p.account_id = $1 AND p.id < $2
ORDER BY p.id DESC
LIMIT $3`

	accountExistsSQL = `SELECT EXISTS (SELECT 1 FROM account WHERE id = $1)`
)

// CreateAccount implements ledger.Store.
func (s *Store) CreateAccount(ctx context.Context, id, currency, holder string) (ledger.Account, bool, error) {
	var (
		a       ledger.Account
		created bool
	)
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ensureFundingSQL, currency); err != nil {
			return fmt.Errorf("ensure funding account %s: %w", currency, err)
		}
		var err error
		a, err = scanAccount(tx.QueryRow(ctx, createAccountSQL, id, currency, holder))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("insert account %s: %w", id, err)
		}
		created = false
		if a, err = scanAccount(tx.QueryRow(ctx, accountSQL, id)); err != nil {
			return fmt.Errorf("read account %s: %w", id, err)
		}
		return checkExisting(a, currency, holder)
	})
	if err != nil {
		return ledger.Account{}, false, err
	}
	return a, created, nil
}

// checkExisting is the answer to opening a that exists already: nil when
// it has currency and holder.
func checkExisting(a ledger.Account, currency, holder string) error {
	switch {
	case a.Currency != currency:
		return ledger.ErrCurrencyConflict
	case a.Holder == "" && !a.Funding:
		return ledger.ErrNoTitular
	case a.Holder != holder:
		return ledger.ErrHolderConflict
	}
	return nil
}

// ClaimAccount implements ledger.Store.
func (s *Store) ClaimAccount(ctx context.Context, id, currency, holder string) (ledger.Account, bool, error) {
	var (
		a       ledger.Account
		claimed bool
	)
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		claimed = false
		var err error
		a, err = postgres.ScanOne(tx.QueryRow(ctx, accountSQL+" FOR UPDATE", id), scanAccount, ledger.ErrAccountNotFound, "read account "+id)
		if err != nil {
			return err
		}
		if err := checkExisting(a, currency, holder); !errors.Is(err, ledger.ErrNoTitular) {
			return err
		}
		if a, err = scanAccount(tx.QueryRow(ctx, claimHolderSQL, id, holder)); err != nil {
			return fmt.Errorf("set titular of account %s: %w", id, err)
		}
		claimed = true
		return nil
	})
	if err != nil {
		return ledger.Account{}, false, err
	}
	return a, claimed, nil
}

// Account implements ledger.Store.
func (s *Store) Account(ctx context.Context, id string) (ledger.Account, error) {
	return postgres.ScanOne(s.db.QueryRow(ctx, accountSQL, id), scanAccount, ledger.ErrAccountNotFound, "read account "+id)
}

// Deposit implements ledger.Store. In one transaction: it reads the
// account, locks the account and the funding account ORDER BY id, claims
// the deposit id (a concurrent request with the same key waited on the
// locks and now replays), counts it against the client's daily ceiling
// (when there is one), writes the two postings and both balances, and
// stores the balance after, which a replay returns.
func (s *Store) Deposit(ctx context.Context, req ledger.DepositRequest) (ledger.Deposit, bool, error) {
	id, accountID, amount, client := req.ID, req.AccountID, req.AmountCents, req.ClientID
	var (
		d        ledger.Deposit
		replayed bool
	)
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		replayed = false
		a, err := postgres.ScanOne(tx.QueryRow(ctx, accountSQL, accountID), scanAccount, ledger.ErrAccountNotFound, "read account "+accountID)
		if err != nil {
			return err
		}
		if a.Funding {
			return ledger.ErrFundingAccount
		}
		// Both accounts are locked, in id order, before anything else:
		// the deposit row's foreign key would otherwise take a key-share
		// lock on the account first, and two deposits to one account (or
		// a deposit and a settlement) would deadlock upgrading it.
		funding := ledger.FundingAccountID(a.Currency)
		if _, err := tx.Exec(ctx, ensureFundingSQL, a.Currency); err != nil {
			return fmt.Errorf("ensure funding account %s: %w", a.Currency, err)
		}
		locked, err := readLocked(tx.Query(ctx, lockAccountsSQL, []string{accountID, funding}))
		if err != nil {
			return err
		}
		// Claim the deposit id: a request with the same key that got the
		// locks first has committed by now, and this one replays it.
		tag, err := tx.Exec(ctx, insertDepositSQL, id, accountID, a.Currency, amount, client, req.RequestID)
		if err != nil {
			return fmt.Errorf("claim deposit %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			if d, err = scanDeposit(tx.QueryRow(ctx, depositSQL, id)); err != nil {
				return fmt.Errorf("read deposit %s: %w", id, err)
			}
			if d.AccountID != accountID || d.AmountCents != amount || d.ClientID != client {
				return ledger.ErrKeyReused
			}
			d.AccountHolder = a.Holder
			replayed = true
			return nil
		}
		if req.DayCeilingCents > 0 {
			var total int64
			err := tx.QueryRow(ctx, countDepositSQL, client, a.Currency, amount, req.DayCeilingCents).Scan(&total)
			if errors.Is(err, pgx.ErrNoRows) {
				return &ledger.DailyCeilingError{MaxCents: req.DayCeilingCents, Currency: a.Currency}
			}
			if err != nil {
				return fmt.Errorf("count the deposits of the day: %w", err)
			}
		}
		fundingBefore, before := locked[funding].BalanceCents, locked[accountID].BalanceCents
		if before > math.MaxInt64-amount || fundingBefore < math.MinInt64+amount {
			return ledger.ErrBalanceOverflow
		}
		if _, err := tx.Exec(ctx, depositPostingsSQL, id, funding, accountID, amount, fundingBefore-amount, before+amount); err != nil {
			return mapOverflow(fmt.Errorf("write deposit postings: %w", err))
		}
		var after, ignored int64
		if err := tx.QueryRow(ctx, creditSQL, funding, -amount).Scan(&ignored); err != nil {
			return mapOverflow(fmt.Errorf("debit funding account: %w", err))
		}
		if err := tx.QueryRow(ctx, creditSQL, accountID, amount).Scan(&after); err != nil {
			return mapOverflow(fmt.Errorf("credit account %s: %w", accountID, err))
		}
		d = ledger.Deposit{ID: id, AccountID: accountID, Currency: a.Currency, AmountCents: amount, BalanceAfterCents: after,
			ClientID: client, RequestID: req.RequestID, AccountHolder: a.Holder}
		if err := tx.QueryRow(ctx, finishDepositSQL, id, after).Scan(&d.CreatedAt); err != nil {
			return fmt.Errorf("record deposit %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return ledger.Deposit{}, false, err
	}
	return d, replayed, nil
}

// mapOverflow turns a numeric overflow of a balance into
// ledger.ErrBalanceOverflow.
func mapOverflow(err error) error {
	if postgres.Code(err) == codeNumericOutOfRange {
		return ledger.ErrBalanceOverflow
	}
	return err
}

// codeNumericOutOfRange is SQLSTATE numeric_value_out_of_range (bigint
// overflow).
const codeNumericOutOfRange = "22003"

// Postings implements ledger.Store.
func (s *Store) Postings(ctx context.Context, accountID string, before int64, limit int) ([]ledger.Posting, error) {
	var exists bool
	if err := s.db.QueryRow(ctx, accountExistsSQL, accountID).Scan(&exists); err != nil {
		return nil, fmt.Errorf("find account %s: %w", accountID, err)
	}
	if !exists {
		return nil, ledger.ErrAccountNotFound
	}
	rows, err := s.db.Query(ctx, postingsSQL, accountID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list postings of %s: %w", accountID, err)
	}
	defer rows.Close()
	var out []ledger.Posting
	for rows.Next() {
		p, err := scanPosting(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list postings of %s: %w", accountID, err)
	}
	return out, nil
}

func scanAccount(row pgx.Row) (ledger.Account, error) {
	var a ledger.Account
	err := row.Scan(&a.ID, &a.Currency, &a.BalanceCents, &a.ReservedCents, &a.Holder, &a.Funding, &a.CreatedAt)
	return a, err
}

func scanDeposit(row pgx.Row) (ledger.Deposit, error) {
	var d ledger.Deposit
	err := row.Scan(&d.ID, &d.AccountID, &d.Currency, &d.AmountCents, &d.BalanceAfterCents, &d.ClientID, &d.RequestID, &d.CreatedAt)
	return d, err
}

// Deposits implements ledger.Store.
func (s *Store) Deposits(ctx context.Context, limit int) ([]ledger.Deposit, error) {
	rows, err := s.db.Query(ctx, depositsSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list deposits: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledger.Deposit, error) { return scanDeposit(r) })
	if err != nil {
		return nil, fmt.Errorf("list deposits: %w", err)
	}
	return out, nil
}
