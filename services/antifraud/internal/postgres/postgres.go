// Package postgres stores antifraud decisions in PostgreSQL and writes their
// events to the service's outbox, in the caller's transaction.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

var (
	_ analysis.Store = (*Store)(nil)
	_ analysis.Tx    = (*tx)(nil)
)

// Store is the decision table plus the outbox of one database.
type Store struct {
	db *pg.DB
	ob *outbox.Outbox
}

// NewStore returns the store of db, enqueueing events to ob.
func NewStore(db *pg.DB, ob *outbox.Outbox) *Store {
	return &Store{db: db, ob: ob}
}

// InTx runs fn in one transaction (see analysis.Store).
func (s *Store) InTx(ctx context.Context, fn func(analysis.Tx) error) error {
	return s.db.InTx(ctx, func(t pgx.Tx) error {
		return fn(&tx{tx: t, ob: s.ob})
	})
}

type tx struct {
	tx pgx.Tx
	ob *outbox.Outbox
}

// lockAccountSQL takes a transaction-scoped advisory lock on the source
// account. The two-key form keeps antifraud's locks in their own space; a
// hash collision only makes two accounts wait for each other.
const lockAccountSQL = `SELECT pg_advisory_xact_lock(hashtext('antifraud.account'), hashtext($1))`

func (t *tx) LockAccount(ctx context.Context, account string) error {
	if _, err := t.tx.Exec(ctx, lockAccountSQL, account); err != nil {
		return fmt.Errorf("lock account: %w", err)
	}
	return nil
}

const decisionSQL = `
SELECT transfer_id, request_event_id, source_account, dest_account, amount_cents, currency, client_id,
       occurred_at, score, threshold, outcome, rules, event_id, decided_at
FROM decision
WHERE transfer_id = $1`

func (t *tx) Decision(ctx context.Context, transferID uuid.UUID) (analysis.Decision, error) {
	var d analysis.Decision
	var outcome string
	err := t.tx.QueryRow(ctx, decisionSQL, transferID).Scan(
		&d.TransferID, &d.RequestEventID, &d.SourceAccount, &d.DestAccount, &d.AmountCents, &d.Currency, &d.ClientID,
		&d.OccurredAt, &d.Score, &d.Threshold, &outcome, &d.Rules, &d.EventID, &d.DecidedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return analysis.Decision{}, analysis.ErrNotFound
	}
	if err != nil {
		return analysis.Decision{}, fmt.Errorf("read decision %s: %w", transferID, err)
	}
	d.Outcome = analysis.Outcome(outcome)
	d.OccurredAt, d.DecidedAt = d.OccurredAt.UTC(), d.DecidedAt.UTC()
	if d.Rules == nil {
		d.Rules = []string{}
	}
	return d, nil
}

// historySQL reads the partial index decision_velocity: the approved
// transfers one client requested from one account. The sum is capped so
// that it always fits a bigint.
const historySQL = `
SELECT count(*), LEAST(COALESCE(sum(amount_cents), 0), 9223372036854775807)::bigint
FROM decision
WHERE source_account = $1 AND client_id = $2 AND outcome = 'APPROVED' AND occurred_at > $3`

func (t *tx) History(ctx context.Context, account, client string, since time.Time) (risk.History, error) {
	var h risk.History
	if err := t.tx.QueryRow(ctx, historySQL, account, client, since).Scan(&h.Count, &h.AmountCents); err != nil {
		return risk.History{}, fmt.Errorf("read history: %w", err)
	}
	return h, nil
}

// insertSQL does nothing on any conflict: both unique columns (transfer_id
// and event_id, derived from it) identify the transfer, and naming only one
// as the arbiter would let a concurrent insert fail on the other.
const insertSQL = `
INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency,
                      occurred_at, score, threshold, outcome, rules, event_id, decided_at, client_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT DO NOTHING`

func (t *tx) Insert(ctx context.Context, d analysis.Decision) error {
	rules := d.Rules
	if rules == nil {
		rules = []string{}
	}
	tag, err := t.tx.Exec(ctx, insertSQL,
		d.TransferID, d.RequestEventID, d.SourceAccount, d.DestAccount, d.AmountCents, d.Currency,
		d.OccurredAt, d.Score, d.Threshold, string(d.Outcome), rules, d.EventID, d.DecidedAt, d.ClientID)
	if err != nil {
		return fmt.Errorf("insert decision %s: %w", d.TransferID, err)
	}
	if tag.RowsAffected() == 0 {
		return analysis.ErrDuplicate
	}
	return nil
}

func (t *tx) Enqueue(ctx context.Context, m outbox.Message) error {
	return t.ob.Enqueue(ctx, t.tx, m)
}
