package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// refundRecordSQL reads the idempotency record of the refund with a key.
const refundRecordSQL = `SELECT cliente_id, hash_requisicao, resposta_status, resposta_corpo FROM estorno WHERE id = $1`

// refundCommittedSQL sums the refunds of a transfer not rejected: the
// pending ones may still settle, so they count against what remains.
const refundCommittedSQL = `SELECT coalesce(sum(valor_centavos), 0)::bigint FROM estorno WHERE transferencia_id = $1 AND status <> 'REJEITADO'`

const refundInsertSQL = `
INSERT INTO estorno (id, transferencia_id, valor_centavos, status, cliente_id, evento_id,
                     hash_requisicao, resposta_status, resposta_corpo, criado_em, atualizado_em)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`

const refundColumns = `id, transferencia_id, valor_centavos, status, coalesce(motivo, ''), cliente_id, criado_em, atualizado_em`

const refundGetSQL = `SELECT ` + refundColumns + ` FROM estorno WHERE id = $1`

// refundsOfSQL reads a transfer's refunds, oldest first (index
// estorno_transferencia).
const refundsOfSQL = `SELECT ` + refundColumns + ` FROM estorno WHERE transferencia_id = $1 ORDER BY criado_em, id`

// Refund implements transfer.Store. Its claim is Create's (an advisory
// lock on the key, taken without waiting); the transfer's row lock then
// orders the refunds of one transfer, so that of two refunds with
// different keys the second sums the first: together they never exceed
// what the transfer settled. The refund row and its outbox row are
// written in this one transaction, or neither is.
func (s *Store) Refund(ctx context.Context, id, transferID uuid.UUID, decide func(transfer.Transfer, int64) (transfer.RefundCreation, error)) (*transfer.Record, error) {
	var rec *transfer.Record
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		rec = nil
		r, t, err := s.claimAndLock(ctx, tx, id, transferID, refundRecordSQL)
		if err != nil || r != nil {
			rec = r
			return err // nothing written: the commit only releases the claim
		}
		var committed int64
		if err := tx.QueryRow(ctx, refundCommittedSQL, transferID).Scan(&committed); err != nil {
			return fmt.Errorf("read refunds of transfer %s: %w", transferID, err)
		}
		c, err := decide(t, committed)
		if err != nil {
			return err
		}
		e := c.Refund
		_, err = tx.Exec(ctx, refundInsertSQL, e.ID, e.TransferID, e.AmountCents, string(e.Status), e.Client, c.Event.ID,
			c.Fingerprint[:], int16(c.Response.StatusCode), c.Response.Body, e.CreatedAt) //nolint:gosec // HTTP status codes fit
		if err != nil {
			return fmt.Errorf("insert refund %s: %w", e.ID, err)
		}
		return s.outbox.Enqueue(ctx, tx, c.Event)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// readRecord reads the idempotency record of id with query (a command's
// or a refund's): nil when there is none.
func readRecord(ctx context.Context, tx pgx.Tx, query string, id uuid.UUID) (*transfer.Record, error) {
	var r transfer.Record
	var fp []byte
	var status int16
	err := tx.QueryRow(ctx, query, id).Scan(&r.Client, &fp, &status, &r.Response.Body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read idempotency record %s: %w", id, err)
	case len(fp) != len(r.Fingerprint):
		return nil, fmt.Errorf("%s: corrupt idempotency record", id)
	}
	copy(r.Fingerprint[:], fp)
	r.Response.StatusCode = int(status)
	return &r, nil
}

// GetRefund implements transfer.Store.
func (s *Store) GetRefund(ctx context.Context, id uuid.UUID) (transfer.Refund, error) {
	r, err := scanRefund(s.db.QueryRow(ctx, refundGetSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return transfer.Refund{}, fmt.Errorf("get refund %s: %w", id, transfer.ErrRefundNotFound)
	}
	if err != nil {
		return transfer.Refund{}, fmt.Errorf("get refund %s: %w", id, err)
	}
	return r, nil
}

// RefundsOf returns the refunds of the transfer transferID, oldest first:
// none for an unknown transfer. The operators' journey reads it.
func (s *Store) RefundsOf(ctx context.Context, transferID uuid.UUID) ([]transfer.Refund, error) {
	rows, err := s.db.Query(ctx, refundsOfSQL, transferID)
	if err != nil {
		return nil, fmt.Errorf("read refunds of transfer %s: %w", transferID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (transfer.Refund, error) { return scanRefund(row) })
	if err != nil {
		return nil, fmt.Errorf("read refunds of transfer %s: %w", transferID, err)
	}
	return out, nil
}

// scanRefund reads one row of refundColumns.
func scanRefund(row pgx.Row) (transfer.Refund, error) {
	var r transfer.Refund
	var status string
	if err := row.Scan(&r.ID, &r.TransferID, &r.AmountCents, &status, &r.Reason, &r.Client, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return transfer.Refund{}, err
	}
	r.Status, r.CreatedAt, r.UpdatedAt = transfer.RefundStatus(status), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// applyRefundsSQL is ApplyRefundResults in one statement. A result
// matches a refund when one has its id, its transfer and, when settled,
// its amount; only matched results are marked in inbox_event (the
// deduplication, as applyAllSQL's), and of the newly marked, each refund
// takes its first in batch order if it is still PENDENTE (forward only:
// LIQUIDADO and REJEITADO are terminal). A settled refund adds its amount
// to its transfer's valor_estornado_centavos in the same statement. It
// returns the event ids of the results that matched, how many of those were new, and the
// event ids of the results that moved a refund.
const applyRefundsSQL = `
WITH input AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::bigint[])
        WITH ORDINALITY AS u(event_id, refund_id, transfer_id, status, reason, amount, n)
), matched AS (
    SELECT i.* FROM input AS i JOIN estorno AS e ON e.id = i.refund_id AND e.transferencia_id = i.transfer_id
    WHERE i.status <> 'LIQUIDADO' OR i.amount = e.valor_centavos
), marked AS (
    INSERT INTO inbox_event (consumer, event_id)
    SELECT $1, m.event_id FROM matched AS m ORDER BY m.n
    ON CONFLICT DO NOTHING
    RETURNING event_id
), first AS (
    SELECT DISTINCT ON (m.refund_id) m.* FROM matched AS m JOIN marked AS k ON k.event_id = m.event_id
    ORDER BY m.refund_id, m.n
), moved AS (
    UPDATE estorno AS e
    SET status = f.status, motivo = NULLIF(f.reason, ''), atualizado_em = greatest(now(), e.criado_em)
    FROM first AS f
    WHERE e.id = f.refund_id AND e.status = 'PENDENTE'
    RETURNING f.event_id, e.transferencia_id, e.valor_centavos, e.status
), refunded AS (
    -- Run although unread: PostgreSQL runs every data-modifying WITH.
    UPDATE transferencia AS t
    SET valor_estornado_centavos = t.valor_estornado_centavos + s.total, atualizada_em = greatest(now(), t.atualizada_em)
    FROM (SELECT transferencia_id, sum(valor_centavos) AS total FROM moved WHERE status = 'LIQUIDADO' GROUP BY transferencia_id) AS s
    WHERE t.id = s.transferencia_id
    RETURNING t.id
)
SELECT ARRAY(SELECT event_id FROM matched), (SELECT count(*) FROM marked), ARRAY(SELECT event_id FROM moved)`

// ApplyRefundResults projects rs, the ledger's refund results in offset
// order, in one transaction and one statement (see applyRefundsSQL): out[i]
// is what rs[i] did, Moved, Unchanged (a duplicate event id, or a refund
// already final) or Unmatched (no refund here has its id with its transfer
// and amount: nothing is written for it, not even its inbox row). The
// deduplication is ApplyResults': one row per event id in inbox_event,
// written with the effect; duplicates count in inbox_duplicates_total.
func (s *Store) ApplyRefundResults(ctx context.Context, rs []transfer.RefundResult) ([]transfer.Outcome, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	var eventIDs, refundIDs, transferIDs [][16]byte
	var statuses, reasons []string
	var amounts []int64
	for _, r := range rs {
		if r.Status != transfer.RefundSettled && r.Status != transfer.RefundRejected {
			return nil, fmt.Errorf("apply refund result: status %q is not a result", r.Status)
		}
		if r.Status == transfer.RefundRejected && r.Reason == "" {
			return nil, errors.New("apply refund result: rejection without a reason")
		}
		eventIDs, refundIDs, transferIDs = append(eventIDs, r.EventID), append(refundIDs, r.RefundID), append(transferIDs, r.TransferID)
		reason := ""
		if r.Status == transfer.RefundRejected {
			reason = r.Reason
		}
		statuses, reasons, amounts = append(statuses, string(r.Status)), append(reasons, reason), append(amounts, r.AmountCents)
	}
	var fresh int64
	var matched, moved []uuid.UUID
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, applyRefundsSQL, s.consumer, eventIDs, refundIDs, transferIDs, statuses, reasons, amounts).
			Scan(&matched, &fresh, &moved)
	})
	if err != nil {
		return nil, fmt.Errorf("apply %d refund results: %w", len(rs), err)
	}
	s.metrics.duplicates.Add(float64(int64(len(matched)) - fresh))
	outcome := make(map[uuid.UUID]transfer.Outcome, len(rs))
	for _, id := range matched {
		outcome[id] = transfer.Unchanged
	}
	for _, id := range moved {
		outcome[id] = transfer.Moved
	}
	out := make([]transfer.Outcome, len(rs))
	for i, r := range rs {
		o, ok := outcome[r.EventID]
		if !ok {
			o = transfer.Unmatched
		}
		out[i] = o
		outcome[r.EventID] = transfer.Unchanged // a repeated event id changes nothing
	}
	return out, nil
}
