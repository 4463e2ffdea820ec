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
// account), from the page's upper bound, (criada_em, id) < ($before,
// $before_id), down to criada_em >= $since. A listing reads each status's
// range of its index in a branch of its own (a status not asked for is a
// branch the server skips at once, its constant test false) and merges
// the branches in order (Merge Append), stopped once the page is full: a
// page reads about as many rows as it shows, however deep it is (no
// OFFSET). The branches' rows are whole transferencia rows, so that
// scanTransfer reads them as it reads a GET's.

// historyPartyRange closes each branch of historyByPartySQL.
const historyPartyRange = ` AND criada_em >= $3 AND (criada_em, id) < ($4, $5::uuid) ORDER BY criada_em DESC, id DESC LIMIT $6`

// historyByPartySQL: the transfers $1 created (transferencia_cliente_historico)
// or was paid (transferencia_titular_historico); a transfer it paid to
// itself is in both and listed once.
const historyByPartySQL = `
SELECT DISTINCT ON (criada_em, id) ` + transferColumns + ` FROM (
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'PENDENTE' AND 'PENDENTE' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'RESERVADA' AND 'RESERVADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'LIQUIDADA' AND 'LIQUIDADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'REJEITADA' AND 'REJEITADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'CANCELADA' AND 'CANCELADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE cliente_id = $1 AND status = 'EXPIRADA' AND 'EXPIRADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'PENDENTE' AND 'PENDENTE' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'RESERVADA' AND 'RESERVADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'LIQUIDADA' AND 'LIQUIDADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'REJEITADA' AND 'REJEITADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'CANCELADA' AND 'CANCELADA' = ANY($2::text[])` + historyPartyRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE titular_destino = $1 AND status = 'EXPIRADA' AND 'EXPIRADA' = ANY($2::text[])` + historyPartyRange + `)
) AS page ORDER BY criada_em DESC, id DESC LIMIT $6`

// historyAllRange closes each branch of historyAllSQL.
const historyAllRange = ` AND criada_em >= $2 AND (criada_em, id) < ($3, $4::uuid) ORDER BY criada_em DESC, id DESC LIMIT $5`

// historyAllSQL: every client's transfers (transferencia_historico), for
// operators.
const historyAllSQL = `
SELECT ` + transferColumns + ` FROM (
    (SELECT * FROM transferencia WHERE status = 'PENDENTE' AND 'PENDENTE' = ANY($1::text[])` + historyAllRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE status = 'RESERVADA' AND 'RESERVADA' = ANY($1::text[])` + historyAllRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE status = 'LIQUIDADA' AND 'LIQUIDADA' = ANY($1::text[])` + historyAllRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE status = 'REJEITADA' AND 'REJEITADA' = ANY($1::text[])` + historyAllRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE status = 'CANCELADA' AND 'CANCELADA' = ANY($1::text[])` + historyAllRange + `)
    UNION ALL
    (SELECT * FROM transferencia WHERE status = 'EXPIRADA' AND 'EXPIRADA' = ANY($1::text[])` + historyAllRange + `)
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
