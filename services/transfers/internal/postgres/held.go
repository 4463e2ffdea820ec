package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// heldColumns are a held result's columns with those of the transfer that
// has its id now, if any (LEFT JOIN transferencia AS t).
const heldColumns = `
r.evento_id, r.tipo, r.transferencia_id, r.status, COALESCE(r.motivo, ''), r.payload, r.recebido_em,
COALESCE(r.resolucao, ''), r.resolvido_em, COALESCE(r.resolvido_por, ''), COALESCE(r.motivo_resolucao, ''),
r.evento_solicitacao_id, t.id IS NOT NULL, COALESCE(t.conta_origem, ''), COALESCE(t.conta_destino, ''), COALESCE(t.valor_centavos, 0),
COALESCE(t.moeda, ''), COALESCE(t.status, ''), COALESCE(t.motivo_rejeicao, ''), COALESCE(t.cliente_id, ''),
t.criada_em, t.atualizada_em`

// heldListSQL lists the held results still unresolved, oldest first.
const heldListSQL = `
SELECT ` + heldColumns + `
FROM resultado_retido AS r LEFT JOIN transferencia AS t ON t.id = r.transferencia_id
WHERE r.resolucao IS NULL
ORDER BY r.recebido_em, r.evento_id
LIMIT $1`

const heldByIDSQL = `
SELECT ` + heldColumns + `
FROM resultado_retido AS r LEFT JOIN transferencia AS t ON t.id = r.transferencia_id
WHERE r.evento_id = $1`

// heldLockSQL locks the held row and the transfer with its id (when there
// is one), so that the check and the update see what they change.
const heldLockSQL = heldByIDSQL + ` FOR UPDATE OF r`

const heldCountSQL = `SELECT count(*) FROM resultado_retido WHERE resolucao IS NULL`

// heldApplySQL moves the transfer, still PENDENTE, to the ledger's result,
// with the destination's titular the held settlement ($4) named.
const heldApplySQL = `
UPDATE transferencia AS t
SET status = $2::text, motivo_rejeicao = NULLIF($3, ''), atualizada_em = greatest(now(), t.criada_em),
    titular_destino = CASE WHEN $2::text = 'LIQUIDADA' THEN r.titular_destino END
FROM resultado_retido AS r
WHERE t.id = $1 AND t.status = 'PENDENTE' AND r.evento_id = $4`

// heldResolveSQL resolves a held row that is still unresolved.
const heldResolveSQL = `
UPDATE resultado_retido
SET resolucao = $2, resolvido_em = now(), resolvido_por = $3, motivo_resolucao = NULLIF($4, '')
WHERE evento_id = $1 AND resolucao IS NULL`

func scanHeld(row pgx.Row) (transfer.HeldResult, error) {
	var h transfer.HeldResult
	var status, tStatus, payload string
	var resolvedAt, created, updated *time.Time
	var exists bool
	var requestEventID *uuid.UUID
	var t transfer.Transfer
	err := row.Scan(&h.EventID, &h.Type, &h.TransferID, &status, &h.Reason, &payload, &h.ReceivedAt,
		&h.Resolution, &resolvedAt, &h.ResolvedBy, &h.Note,
		&requestEventID, &exists, &t.Source, &t.Destination, &t.AmountCents, &t.Currency, &tStatus, &t.Reason, &t.Client, &created, &updated)
	if err != nil {
		return h, err
	}
	h.Status, h.Payload, h.ReceivedAt = transfer.Status(status), []byte(payload), h.ReceivedAt.UTC()
	if resolvedAt != nil {
		h.ResolvedAt = resolvedAt.UTC()
	}
	if requestEventID != nil {
		h.RequestEventID = *requestEventID
	}
	if exists {
		t.ID, t.Status = h.TransferID, transfer.Status(tStatus)
		t.CreatedAt, t.UpdatedAt = created.UTC(), updated.UTC()
		h.Transfer = &t
	}
	return h, nil
}

// ListHeld returns at most limit held results still unresolved, oldest
// first, each with the transfer that has its id now, if any.
func (s *Store) ListHeld(ctx context.Context, limit int) ([]transfer.HeldResult, error) {
	rows, err := s.db.Query(ctx, heldListSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list held results: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (transfer.HeldResult, error) { return scanHeld(r) })
	if err != nil {
		return nil, fmt.Errorf("list held results: %w", err)
	}
	return out, nil
}

// GetHeld returns the held result of eventID, resolved or not, or
// ErrHeldNotFound.
func (s *Store) GetHeld(ctx context.Context, eventID uuid.UUID) (transfer.HeldResult, error) {
	h, err := scanHeld(s.db.QueryRow(ctx, heldByIDSQL, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, fmt.Errorf("held result %s: %w", eventID, transfer.ErrHeldNotFound)
	}
	if err != nil {
		return h, fmt.Errorf("held result %s: %w", eventID, err)
	}
	return h, nil
}

// CountHeld returns how many held results are unresolved.
func (s *Store) CountHeld(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, heldCountSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held results: %w", err)
	}
	return n, nil
}

// ApplyHeld applies the ledger's outcome to the transfer with the held
// result's id, in one transaction, only if the transfer row and the held
// row both match ledger, the ledger's own record of that id as the ledger
// answered it (transfer.CheckSettlement), and resolves the held row as
// applied by res. It returns the transfer as it now is. Errors:
// ErrHeldNotFound, ErrHeldResolved, ErrNotTheSettledTransfer (no transfer
// has the id yet, it is not PENDENTE, or a field differs from ledger);
// nothing changes then.
func (s *Store) ApplyHeld(ctx context.Context, eventID uuid.UUID, ledger transfer.Settlement, res transfer.Resolution) (transfer.Transfer, error) {
	var t transfer.Transfer
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		h, err := s.lockHeld(ctx, tx, eventID)
		if err != nil {
			return err
		}
		if h.Transfer == nil {
			return fmt.Errorf("%w: no transfer has the id %s yet", transfer.ErrNotTheSettledTransfer, h.TransferID)
		}
		if err := transfer.CheckSettlement(h, *h.Transfer, ledger); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, heldApplySQL, h.TransferID, string(ledger.Result), ledger.Reason, eventID)
		if err != nil {
			return fmt.Errorf("apply held result %s: %w", eventID, err)
		}
		if tag.RowsAffected() != 1 {
			// The row lock of FOR UPDATE OF r does not cover the transfer:
			// a result projected meanwhile made it final.
			return fmt.Errorf("%w: the transfer is no longer PENDENTE", transfer.ErrNotTheSettledTransfer)
		}
		if _, err := tx.Exec(ctx, heldResolveSQL, eventID, transfer.ResolutionApplied, res.Operator, res.Note); err != nil {
			return fmt.Errorf("resolve held result %s: %w", eventID, err)
		}
		t = *h.Transfer
		return nil
	})
	if err != nil {
		return transfer.Transfer{}, err
	}
	return s.Get(ctx, t.ID)
}

// DiscardHeld resolves the held result of eventID as discarded by res,
// changing no transfer. Errors: ErrHeldNotFound, ErrHeldResolved.
func (s *Store) DiscardHeld(ctx context.Context, eventID uuid.UUID, res transfer.Resolution) error {
	return s.db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.lockHeld(ctx, tx, eventID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, heldResolveSQL, eventID, transfer.ResolutionDiscarded, res.Operator, res.Note); err != nil {
			return fmt.Errorf("discard held result %s: %w", eventID, err)
		}
		return nil
	})
}

// lockHeld locks the unresolved held row of eventID.
func (s *Store) lockHeld(ctx context.Context, tx pgx.Tx, eventID uuid.UUID) (transfer.HeldResult, error) {
	h, err := scanHeld(tx.QueryRow(ctx, heldLockSQL, eventID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return h, fmt.Errorf("held result %s: %w", eventID, transfer.ErrHeldNotFound)
	case err != nil:
		return h, fmt.Errorf("lock held result %s: %w", eventID, err)
	case h.Resolution != "":
		return h, fmt.Errorf("held result %s: %w", eventID, transfer.ErrHeldResolved)
	}
	return h, nil
}

// ReappliedBy is the resolvido_por of a held result the re-apply task
// applied (no operator did).
const ReappliedBy = "transferencias-projecao"

// reapplyNote is the motivo_resolucao of a re-applied held result.
const reapplyNote = "re-applied: the transfer of the request it was decided for became visible"

// reapplySQL applies the held results that are now bound ($1: received
// within this window, $2: at most this many): unresolved, carrying a
// request event id, whose transfer now exists with that same request event
// id and whose status moves forward to theirs (transfer.CanMove: a result
// before visibility, the ledger's answer back before the transfer's commit
// was visible here). Each transfer takes one such result a pass: a
// reservation first, else the oldest (a hold's end then applies in the
// next pass, from RESERVADA); each applied row is resolved as APLICADO by
// ReappliedBy, in the same statement. SKIP LOCKED: a row an operator is
// resolving, or another instance is re-applying, is left to them. It
// returns the creation times of the transfers that left PENDENTE.
const reapplySQL = `
WITH due AS (
    SELECT r.evento_id, r.transferencia_id, r.status, r.motivo, r.valor_centavos, r.titular_destino, r.recebido_em, t.status AS was
    FROM resultado_retido AS r JOIN transferencia AS t ON t.id = r.transferencia_id
    WHERE r.resolucao IS NULL AND r.recebido_em > now() - $1::interval
      AND r.evento_solicitacao_id IS NOT NULL AND t.evento_solicitacao_id = r.evento_solicitacao_id
      AND (t.status = 'PENDENTE' OR (t.status = 'RESERVADA' AND r.status IN ('LIQUIDADA', 'CANCELADA', 'EXPIRADA')))
    ORDER BY r.recebido_em, r.evento_id
    LIMIT $2
    FOR UPDATE OF r SKIP LOCKED
), first AS (
    SELECT DISTINCT ON (d.transferencia_id) d.* FROM due AS d
    ORDER BY d.transferencia_id, d.status <> 'RESERVADA', d.recebido_em, d.evento_id
), moved AS (
    UPDATE transferencia AS t
    SET status = f.status, motivo_rejeicao = f.motivo, atualizada_em = greatest(now(), t.criada_em),
        valor_liquidado_centavos = CASE WHEN f.status = 'LIQUIDADA' AND t.captura = 'MANUAL'
            AND f.valor_centavos BETWEEN 1 AND t.valor_centavos THEN f.valor_centavos END,
        titular_destino = CASE WHEN f.status = 'LIQUIDADA' THEN f.titular_destino ELSE t.titular_destino END
    FROM first AS f
    WHERE t.id = f.transferencia_id AND t.status = f.was
    RETURNING f.evento_id, t.criada_em, f.was = 'PENDENTE' AS ended
), resolved AS (
    UPDATE resultado_retido AS r
    SET resolucao = 'APLICADO', resolvido_em = now(), resolvido_por = $3, motivo_resolucao = $4
    FROM moved AS m
    WHERE r.evento_id = m.evento_id
    RETURNING m.criada_em, m.ended
)
SELECT count(*), ARRAY(SELECT criada_em FROM resolved WHERE ended) FROM resolved`

// heldOverdueSQL counts the unresolved held results received before the
// re-apply window ($1): the re-apply task no longer tries them, an
// operator must.
const heldOverdueSQL = `SELECT count(*) FROM resultado_retido WHERE resolucao IS NULL AND recebido_em <= now() - $1::interval`

// ReapplyHeld applies, in one transaction, at most limit held results
// received within window whose transfer has become visible with the
// request event they were decided for (see reapplySQL), counts them in
// transfers_results_reapplied_total, and returns the creation times of the
// transfers that left PENDENTE, as ApplyResults does; n is how many results
// it applied. No operator is involved: the
// binding proves the result was decided for that transfer's request, which
// is what an operator's check against the ledger establishes for a result
// without one.
func (s *Store) ReapplyHeld(ctx context.Context, window time.Duration, limit int) (n int, created []time.Time, err error) {
	if err := s.db.QueryRow(ctx, reapplySQL, window, limit, ReappliedBy, reapplyNote).Scan(&n, &created); err != nil {
		return 0, nil, fmt.Errorf("re-apply held results: %w", err)
	}
	s.metrics.reapplied.Add(float64(n))
	return n, created, nil
}

// CountHeldOverdue returns how many held results are unresolved and were
// received more than window ago: past the re-apply task, waiting for an
// operator.
func (s *Store) CountHeldOverdue(ctx context.Context, window time.Duration) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, heldOverdueSQL, window).Scan(&n); err != nil {
		return 0, fmt.Errorf("count overdue held results: %w", err)
	}
	return n, nil
}
