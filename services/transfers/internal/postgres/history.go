package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

var _ transfer.HistoryStore = (*Store)(nil)

// The listing's queries (GET /transferencias). Each branch is one
// backward range scan of an index of migration 00008 (or 00003 for an
// account) from the page's upper bound, (criada_em, id) < ($before,
// $before_id), down to criada_em >= $since, stopped after $limit rows: a
// page costs the same however deep it is (no OFFSET). A listing by
// status reads each status's range of the index on its own (one LATERAL
// branch a status of $statuses) and merges the heads. The branches' rows
// are the whole transferencia rows, so that scanTransfer reads them as it
// reads a GET's.

// historyByPartySQL: the transfers $1 created (transferencia_cliente_historico)
// or was paid (transferencia_titular_historico); a transfer it paid to
// itself is in both and listed once.
const historyByPartySQL = `
SELECT ` + transferColumns + ` FROM (
    SELECT DISTINCT ON (u.criada_em, u.id) u.* FROM (
        SELECT t.* FROM unnest($2::text[]) AS s(status) CROSS JOIN LATERAL (
            SELECT * FROM transferencia
            WHERE cliente_id = $1 AND status = s.status AND criada_em >= $3 AND (criada_em, id) < ($4, $5::uuid)
            ORDER BY criada_em DESC, id DESC LIMIT $6) AS t
        UNION ALL
        SELECT t.* FROM unnest($2::text[]) AS s(status) CROSS JOIN LATERAL (
            SELECT * FROM transferencia
            WHERE titular_destino = $1 AND status = s.status AND criada_em >= $3 AND (criada_em, id) < ($4, $5::uuid)
            ORDER BY criada_em DESC, id DESC LIMIT $6) AS t
    ) AS u
    ORDER BY u.criada_em DESC, u.id DESC LIMIT $6
) AS page ORDER BY criada_em DESC, id DESC`

// historyAllSQL: every client's transfers (transferencia_historico), for
// operators.
const historyAllSQL = `
SELECT ` + transferColumns + ` FROM (
    SELECT t.* FROM unnest($1::text[]) AS s(status) CROSS JOIN LATERAL (
        SELECT * FROM transferencia
        WHERE status = s.status AND criada_em >= $2 AND (criada_em, id) < ($3, $4::uuid)
        ORDER BY criada_em DESC, id DESC LIMIT $5) AS t
) AS page ORDER BY criada_em DESC, id DESC LIMIT $5`

// historyByAccountSQL: the transfers from or to account $1
// (transferencia_origem_recentes, transferencia_destino_recentes), of
// the statuses $2 and, unless $6 is empty, of party $6 (created by it or
// paid to it), both checked on the rows the scan reads.
const historyByAccountSQL = `
SELECT ` + transferColumns + ` FROM (
    (SELECT * FROM transferencia
     WHERE conta_origem = $1 AND criada_em >= $3 AND (criada_em, id) < ($4, $5::uuid)
       AND status = ANY($2::text[]) AND ($6 = '' OR cliente_id = $6 OR titular_destino = $6)
     ORDER BY criada_em DESC, id DESC LIMIT $7)
    UNION ALL
    (SELECT * FROM transferencia
     WHERE conta_destino = $1 AND criada_em >= $3 AND (criada_em, id) < ($4, $5::uuid)
       AND status = ANY($2::text[]) AND ($6 = '' OR cliente_id = $6 OR titular_destino = $6)
     ORDER BY criada_em DESC, id DESC LIMIT $7)
) AS page ORDER BY criada_em DESC, id DESC LIMIT $7`

// History implements transfer.HistoryStore. It only reads.
func (s *Store) History(ctx context.Context, q transfer.HistoryQuery) ([]transfer.Transfer, error) {
	statuses := make([]string, len(q.Statuses))
	for i, st := range q.Statuses {
		statuses[i] = string(st)
	}
	var rows pgx.Rows
	var err error
	switch {
	case q.Account != "":
		rows, err = s.db.Query(ctx, historyByAccountSQL, q.Account, statuses, q.Since, q.Before, q.BeforeID, q.Party, q.Limit)
	case q.Party != "":
		rows, err = s.db.Query(ctx, historyByPartySQL, q.Party, statuses, q.Since, q.Before, q.BeforeID, q.Limit)
	default:
		rows, err = s.db.Query(ctx, historyAllSQL, statuses, q.Since, q.Before, q.BeforeID, q.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list transfers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (transfer.Transfer, error) { return scanTransfer(r) })
	if err != nil {
		return nil, fmt.Errorf("list transfers: %w", err)
	}
	return out, nil
}
