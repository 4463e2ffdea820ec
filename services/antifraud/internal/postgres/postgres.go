// Package postgres stores antifraud decisions in PostgreSQL and writes their
// events to the service's outbox, in the caller's transaction.
package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paysuite/payments/pkg/events"
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

const decisionSQL = `
SELECT transfer_id, request_event_id, source_account, dest_account, amount_cents, currency, client_id,
       occurred_at, score, threshold, outcome, rules, event_id, decided_at
FROM decision
WHERE transfer_id = $1`

// Decision returns the stored decision of a transfer, or
// analysis.ErrNotFound: the operator's read, outside any transaction.
func (s *Store) Decision(ctx context.Context, transferID uuid.UUID) (analysis.Decision, error) {
	return pg.ScanOne(s.db.QueryRow(ctx, decisionSQL, transferID), scanDecision, analysis.ErrNotFound, "read decision "+transferID.String())
}

// scanDecision reads one row of decisionSQL's or decisionsSQL's columns.
func scanDecision(row pgx.Row) (analysis.Decision, error) {
	var d analysis.Decision
	var outcome string
	if err := row.Scan(&d.TransferID, &d.RequestEventID, &d.SourceAccount, &d.DestAccount, &d.AmountCents, &d.Currency,
		&d.ClientID, &d.OccurredAt, &d.Score, &d.Threshold, &outcome, &d.Rules, &d.EventID, &d.DecidedAt); err != nil {
		return analysis.Decision{}, err
	}
	d.Outcome = analysis.Outcome(outcome)
	d.OccurredAt, d.DecidedAt = d.OccurredAt.UTC(), d.DecidedAt.UTC()
	if d.Rules == nil {
		d.Rules = []string{}
	}
	return d, nil
}

// The batch statements. lockAccountsSQL takes a transaction-scoped
// advisory lock on each source account, in the order of their keys, so
// that two batches sharing accounts wait for each other in one order and
// cannot deadlock. The two-key form keeps antifraud's locks in their own
// space; a hash collision only makes two accounts wait for each other.
const (
	lockAccountsSQL = `
SELECT pg_advisory_xact_lock(hashtext('antifraud.account'), k.h)
FROM (SELECT DISTINCT hashtext(a) AS h FROM unnest($1::text[]) AS a ORDER BY h) AS k`

	decisionsSQL = `
SELECT transfer_id, request_event_id, source_account, dest_account, amount_cents, currency, client_id,
       occurred_at, score, threshold, outcome, rules, event_id, decided_at
FROM decision
WHERE transfer_id = ANY($1::uuid[])`

	// historiesSQL reads the partial index decision_velocity: for each
	// query, in query order, the approved transfers one client requested
	// from one account. The sum is capped so that it always fits a bigint.
	historiesSQL = `
SELECT h.n, h.count, h.amount
FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS q(account, client, since, n)
CROSS JOIN LATERAL (
    SELECT q.n, count(*) AS count, LEAST(COALESCE(sum(d.amount_cents), 0), 9223372036854775807)::bigint AS amount
    FROM decision AS d
    WHERE d.source_account = q.account AND d.client_id = q.client AND d.outcome = 'APPROVED' AND d.occurred_at > q.since
) AS h
ORDER BY h.n`

	// insertAllSQL does nothing on any conflict: both unique columns
	// (transfer_id and event_id, derived from it) identify the transfer,
	// and naming only one as the arbiter would let a concurrent insert
	// fail on the other. The rules go as one JSON array per decision,
	// since PostgreSQL has no arrays of arrays of different lengths.
	insertAllSQL = `
INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency,
                      occurred_at, score, threshold, outcome, rules, event_id, decided_at, client_id)
SELECT u.id, u.req, u.src, u.dst, u.amount, u.cur, u.occurred, u.score, u.threshold, u.outcome,
       ARRAY(SELECT jsonb_array_elements_text(u.rules)), u.event_id, u.decided, u.client
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::timestamptz[],
            $8::int[], $9::int[], $10::text[], $11::jsonb[], $12::uuid[], $13::timestamptz[], $14::text[])
     AS u(id, req, src, dst, amount, cur, occurred, score, threshold, outcome, rules, event_id, decided, client)
ON CONFLICT DO NOTHING`
)

// Load implements analysis.Tx: the locks, the stored decisions and the
// histories in one round trip. The transaction's statements run on their
// generic plans with sequential scans off (pg.GenericPlanSQL): made on a new
// deployment's almost empty table, a plan would otherwise read every
// decision for each batch as the table grows.
func (t *tx) Load(ctx context.Context, accounts []string, transfers []uuid.UUID, history []analysis.HistoryQuery) (map[uuid.UUID]analysis.Decision, []risk.History, error) {
	ids := make([][16]byte, len(transfers))
	for i, id := range transfers {
		ids[i] = id
	}
	qAccounts, qClients := make([]string, len(history)), make([]string, len(history))
	qSince := make([]time.Time, len(history))
	for i, q := range history {
		qAccounts[i], qClients[i], qSince[i] = q.Account, q.Client, q.Since
	}
	b := &pgx.Batch{}
	b.Queue(pg.GenericPlanSQL)
	b.Queue(lockAccountsSQL, accounts)
	b.Queue(decisionsSQL, ids)
	if len(history) > 0 {
		b.Queue(historiesSQL, qAccounts, qClients, qSince)
	}
	br := t.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // the first error is returned below
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("plan settings: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("lock accounts: %w", err)
	}
	stored, err := readDecisions(br)
	if err != nil {
		return nil, nil, err
	}
	var hs []risk.History
	if len(history) > 0 {
		if hs, err = readHistories(br, len(history)); err != nil {
			return nil, nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("load batch: %w", err)
	}
	return stored, hs, nil
}

func readDecisions(br pgx.BatchResults) (map[uuid.UUID]analysis.Decision, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]analysis.Decision{}
	for rows.Next() {
		d, err := scanDecision(rows)
		if err != nil {
			return nil, fmt.Errorf("scan decision: %w", err)
		}
		out[d.TransferID] = d
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	return out, nil
}

func readHistories(br pgx.BatchResults, n int) ([]risk.History, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("read histories: %w", err)
	}
	defer rows.Close()
	out := make([]risk.History, n)
	for rows.Next() {
		var i int64
		var h risk.History
		if err := rows.Scan(&i, &h.Count, &h.AmountCents); err != nil {
			return nil, fmt.Errorf("scan history: %w", err)
		}
		if i < 1 || i > int64(n) {
			return nil, fmt.Errorf("read histories: row %d of %d queries", i, n)
		}
		out[i-1] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read histories: %w", err)
	}
	return out, nil
}

// InsertAll implements analysis.Tx: the decisions and their events in one
// round trip.
func (t *tx) InsertAll(ctx context.Context, ds []analysis.Decision, msgs []events.Message) error {
	n := len(ds)
	var (
		ids, reqs, eventIDs = make([][16]byte, n), make([][16]byte, n), make([][16]byte, n)
		srcs, dsts, curs    = make([]string, n), make([]string, n), make([]string, n)
		outcomes, clients   = make([]string, n), make([]string, n)
		rules               = make([]string, n)
		amounts             = make([]int64, n)
		scores, thresholds  = make([]int32, n), make([]int32, n)
		occurred, decidedAt = make([]time.Time, n), make([]time.Time, n)
	)
	for i, d := range ds {
		ids[i], reqs[i], eventIDs[i] = d.TransferID, d.RequestEventID, d.EventID
		srcs[i], dsts[i], curs[i] = d.SourceAccount, d.DestAccount, d.Currency
		outcomes[i], clients[i] = string(d.Outcome), d.ClientID
		amounts[i] = d.AmountCents
		scores[i], thresholds[i] = int32(d.Score), int32(d.Threshold) //nolint:gosec // scores are 0..100, thresholds 1..100
		occurred[i], decidedAt[i] = d.OccurredAt, d.DecidedAt
		r := d.Rules
		if r == nil {
			r = []string{}
		}
		js, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode rules of %s: %w", d.TransferID, err)
		}
		rules[i] = string(js)
	}
	b := &pgx.Batch{}
	var inserted int64
	b.Queue(insertAllSQL, ids, reqs, srcs, dsts, amounts, curs, occurred, scores, thresholds, outcomes, rules,
		eventIDs, decidedAt, clients).Exec(func(tag pgconn.CommandTag) error {
		inserted = tag.RowsAffected()
		return nil
	})
	if err := t.ob.Queue(ctx, t.tx, b, msgs...); err != nil {
		return err
	}
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert %d decisions and their events: %w", n, err)
	}
	if inserted != int64(n) {
		return fmt.Errorf("insert %d decisions: %d already decided: %w", n, int64(n)-inserted, analysis.ErrDuplicate)
	}
	return nil
}
