package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

const (
	// claimRefundsSQL inserts the refunds' markers in refund-id order, as
	// claimSQL does the transfers': one that exists (a redelivery, or one
	// committed by a concurrent delivery it waited for) is not returned.
	claimRefundsSQL = `
INSERT INTO refund (refund_id, transfer_id, result, source_account, dest_account, amount_cents, currency, client_id,
                    operator, event_id)
SELECT u.id, u.transfer_id, 'EM_PROCESSAMENTO', u.src, u.dst, u.amount, u.currency, NULLIF(u.client, ''), u.operator,
       u.event_id
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::bool[], $9::uuid[])
     AS u(id, transfer_id, src, dst, amount, currency, client, operator, event_id)
ORDER BY u.id
ON CONFLICT (refund_id) DO NOTHING
RETURNING refund_id`

	// decidedRefundsSQL reads the results of the refunds of a batch that
	// an earlier transaction decided (after claimRefundsSQL, whose waits
	// they were committed before).
	decidedRefundsSQL = `
SELECT refund_id, transfer_id, result, coalesce(reason, '') FROM refund
WHERE refund_id = ANY($1::uuid[]) AND result <> 'EM_PROCESSAMENTO'`

	// lockRefundedSQL locks the markers of the refunds' transfers in
	// transfer-id order: every refund of a transfer takes this lock before
	// it reads what was refunded of it, so the refunds of one transfer are
	// decided one after the other, whatever their keys. FOR NO KEY UPDATE
	// conflicts with nothing else the ledger does to a marker. It reads
	// what the transfer settled: its amount when LIQUIDADA, the captured
	// amount of a captured hold, 0 otherwise (a reservation's closing is
	// final, so reading it unlocked is enough).
	lockRefundedSQL = `
SELECT m.transfer_id, m.source_account, m.dest_account, m.currency,
       CASE WHEN m.result = 'LIQUIDADA' THEN m.amount_cents
            WHEN m.result = 'RESERVADA' AND r.state = 'captured' THEN r.captured_cents
            ELSE 0 END
FROM processed_transfer m LEFT JOIN reservation r ON r.transfer_id = m.transfer_id
WHERE m.transfer_id = ANY($1::uuid[])
ORDER BY m.transfer_id
FOR NO KEY UPDATE OF m`

	// refundedSQL sums the refunds settled of each transfer. It runs after
	// lockRefundedSQL, as a statement of its own: in READ COMMITTED its
	// snapshot is taken once the transfers' locks are held, so it sees
	// every refund committed by the transaction it waited for (a column
	// of the locking statement would be read in that statement's older
	// snapshot).
	refundedSQL = `
SELECT transfer_id, sum(amount_cents)::bigint FROM refund
WHERE transfer_id = ANY($1::uuid[]) AND result = 'LIQUIDADO'
GROUP BY transfer_id`

	// refundWriteSQL writes the refunds' postings (entry REFUND, the
	// refund's id), the balances and the results ($9-$12) in one
	// statement, as writeSQL does a settlement's.
	refundWriteSQL = `
UPDATE refund AS f
SET result = ($10::text[])[array_position($9::uuid[], f.refund_id)],
    reason = NULLIF(($11::text[])[array_position($9::uuid[], f.refund_id)], ''),
    result_event_id = ($12::uuid[])[array_position($9::uuid[], f.refund_id)]
WHERE f.refund_id = ANY($9::uuid[])`
)

// refundPostingsAndBalances is the settlements' postingsAndBalances with
// the postings' entry type REFUND: one statement writes the postings and
// balances of transfers and refunds alike, refunds naming theirs.
var refundPostingsAndBalances = strings.Replace(postingsAndBalances, "SELECT 'TRANSFER',", "SELECT 'REFUND',", 1)

// Refund implements ledger.Store.
//
// Round trips: begin; claim the markers, lock the transfers, sum their
// refunds, lock the accounts and read the earlier results (pipelined, in
// that order); enqueue the result events and write postings, balances
// and results (pipelined, the writes in one statement); commit.
func (s *Store) Refund(ctx context.Context, fs []ledger.Refund, decide ledger.RefundDecider) ([]ledger.RefundResult, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	if refundPostingsAndBalances == postingsAndBalances {
		return nil, fmt.Errorf("refund postings: the postings statement names no TRANSFER entry type to replace")
	}
	var results []ledger.RefundResult
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		results, err = s.refund(ctx, tx, fs, decide)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// refundBatch is what the first round trip of a refund transaction read.
type refundBatch struct {
	claimed    map[uuid.UUID]bool
	decided    map[uuid.UUID]ledger.RefundResult
	refundable map[uuid.UUID]*ledger.Refundable
	accounts   map[string]*ledger.Account
}

// refund is the body of the refund transaction. It builds all of its
// state afresh, since InTx may run it again.
func (s *Store) refund(ctx context.Context, tx pgx.Tx, fs []ledger.Refund, decide ledger.RefundDecider) ([]ledger.RefundResult, error) {
	first := make(map[uuid.UUID]int, len(fs))
	var (
		ids, transferIDs, eventIDs [][16]byte
		srcs, dsts, curs, clients  []string
		amounts                    []int64
		operators                  []bool
		accountIDs                 []string
	)
	for i, f := range fs {
		if _, dup := first[f.ID]; dup {
			continue
		}
		first[f.ID] = i
		ids, transferIDs, eventIDs = append(ids, [16]byte(f.ID)), append(transferIDs, [16]byte(f.TransferID)), append(eventIDs, [16]byte(f.EventID))
		srcs, dsts, curs, clients = append(srcs, f.Source), append(dsts, f.Dest), append(curs, f.Currency), append(clients, f.ClientID)
		amounts, operators = append(amounts, f.AmountCents), append(operators, f.Operator)
		accountIDs = append(accountIDs, f.Source, f.Dest)
	}
	sortedTransfers := slices.Clone(transferIDs)
	slices.SortFunc(sortedTransfers, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	sortedTransfers = slices.Compact(sortedTransfers)

	b := &pgx.Batch{}
	b.Queue(postgres.GenericPlanSQL)
	b.Queue(claimRefundsSQL, ids, transferIDs, srcs, dsts, amounts, curs, clients, operators, eventIDs)
	b.Queue(decidedRefundsSQL, ids)
	b.Queue(lockRefundedSQL, sortedTransfers)
	b.Queue(refundedSQL, sortedTransfers)
	b.Queue(lockAccountsSQL, accountIDs)
	rb, err := readRefundBatch(tx.SendBatch(ctx, b))
	if err != nil {
		return nil, err
	}

	results := make([]ledger.RefundResult, len(fs))
	var (
		m                  = newMoves(rb.accounts)
		rIDs, rEventIDs    [][16]byte
		rResults, rReasons []string
	)
	for i, f := range fs {
		if j := first[f.ID]; j != i || !rb.claimed[f.ID] {
			r, ok := rb.decided[f.ID]
			if j != i {
				r, ok = results[j], true
			}
			if !ok {
				return nil, fmt.Errorf("refund %s: its marker exists but holds no result", f.ID)
			}
			r.RefundID, r.Replayed = f.ID, true
			results[i] = r
			continue
		}
		d, err := decide(rb.refundable[f.TransferID], rb.accounts[f.Source], rb.accounts[f.Dest], f)
		if err != nil {
			return nil, err
		}
		results[i] = d.RefundResult
		m.add(f.ID, d.Entries, d.Event)
		rIDs, rEventIDs = append(rIDs, [16]byte(f.ID)), append(rEventIDs, [16]byte(d.Event.ID))
		rResults, rReasons = append(rResults, string(d.Outcome)), append(rReasons, d.Reason)
	}
	if len(m.events) == 0 {
		return results, nil // every refund was decided before
	}
	if err := s.write(ctx, tx, rb.accounts, m, "refunds", refundPostingsAndBalances+refundWriteSQL,
		rIDs, rResults, rReasons, rEventIDs); err != nil {
		return nil, err
	}
	return results, nil
}

// readRefundBatch reads the results of the statements refund queued, in
// their order, and closes br.
func readRefundBatch(br pgx.BatchResults) (rb refundBatch, err error) {
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("claim and lock refunds: %w", cerr)
		}
	}()
	if _, err = br.Exec(); err != nil {
		return rb, fmt.Errorf("refund plan setting: %w", err)
	}
	if rb.claimed, err = readClaimed(br); err != nil {
		return rb, fmt.Errorf("claim refunds: %w", err)
	}
	rb.decided = map[uuid.UUID]ledger.RefundResult{}
	var (
		id, transfer   [16]byte
		result, reason string
	)
	if err = forEachRow(br, []any{&id, &transfer, &result, &reason}, func() error {
		rb.decided[uuid.UUID(id)] = ledger.RefundResult{RefundID: id, TransferID: transfer, Outcome: ledger.Outcome(result), Reason: reason}
		return nil
	}); err != nil {
		return rb, fmt.Errorf("read decided refunds: %w", err)
	}
	rb.refundable = map[uuid.UUID]*ledger.Refundable{}
	var t ledger.Refundable
	if err = forEachRow(br, []any{&id, &t.Source, &t.Dest, &t.Currency, &t.SettledCents}, func() error {
		t.TransferID = id
		c := t
		rb.refundable[c.TransferID] = &c
		return nil
	}); err != nil {
		return rb, fmt.Errorf("lock refunded transfers: %w", err)
	}
	var refunded int64
	if err = forEachRow(br, []any{&id, &refunded}, func() error {
		if t := rb.refundable[uuid.UUID(id)]; t != nil {
			t.RefundedCents = refunded
		}
		return nil
	}); err != nil {
		return rb, fmt.Errorf("sum refunds settled: %w", err)
	}
	rb.accounts, err = readLocked(br.Query())
	return rb, err
}

// forEachRow reads the rows of br's next statement into scans, calling fn
// after each.
func forEachRow(br pgx.BatchResults, scans []any, fn func() error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, scans, fn)
	return err
}
