package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// transferColumns are the columns scanTransfer reads, in its order.
const transferColumns = `id, conta_origem, conta_destino, valor_centavos, moeda, status, coalesce(motivo_rejeicao, ''),
       coalesce(cliente_id, ''), coalesce(request_id, ''), criada_em, atualizada_em,
       captura, expira_em, coalesce(valor_liquidado_centavos, 0), coalesce(titular_destino, ''), valor_estornado_centavos`

// byAccountSQL lists both sides of the account, newest first, after the
// cursor ($2, $3) when one is given.
const byAccountSQL = `
SELECT ` + transferColumns + ` FROM (
    (SELECT * FROM transferencia WHERE conta_origem = $1
        AND ($2::timestamptz IS NULL OR (criada_em, id) < ($2, $3::uuid))
      ORDER BY criada_em DESC, id DESC LIMIT $4)
    UNION
    (SELECT * FROM transferencia WHERE conta_destino = $1
        AND ($2::timestamptz IS NULL OR (criada_em, id) < ($2, $3::uuid))
      ORDER BY criada_em DESC, id DESC LIMIT $4)
) t ORDER BY criada_em DESC, id DESC LIMIT $4`

// ByAccount returns at most limit transfers from or to account, newest
// first (creation time, then id), after the transfer created at after with
// id afterID when after is not nil. It only reads.
func (s *Store) ByAccount(ctx context.Context, account string, after *time.Time, afterID *uuid.UUID, limit int) ([]transfer.Transfer, error) {
	rows, err := s.db.Query(ctx, byAccountSQL, account, after, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list transfers of %s: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (transfer.Transfer, error) { return scanTransfer(r) })
	if err != nil {
		return nil, fmt.Errorf("list transfers of %s: %w", account, err)
	}
	return out, nil
}

// scanTransfer reads one row of transferColumns.
func scanTransfer(row pgx.Row) (transfer.Transfer, error) {
	var t transfer.Transfer
	var status string
	var expiresAt *time.Time
	if err := row.Scan(&t.ID, &t.Source, &t.Destination, &t.AmountCents, &t.Currency, &status, &t.Reason,
		&t.Client, &t.RequestID, &t.CreatedAt, &t.UpdatedAt, &t.Capture, &expiresAt, &t.SettledCents, &t.DestHolder, &t.RefundedCents); err != nil {
		return transfer.Transfer{}, err
	}
	if expiresAt != nil {
		t.ExpiresAt = expiresAt.UTC()
	}
	t.Status = transfer.Status(status)
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, nil
}
