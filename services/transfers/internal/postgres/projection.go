package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/periodic"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// applyAllSQL is ApplyResults in one statement. marked is the
// deduplication (see ApplyResults): it records the event ids not yet
// recorded under the consumer ($1), and only those results go on. Of
// those, a result is bound to a transfer when the transfer exists and
// nothing contradicts that it was decided for that transfer's request: its
// request event id ($8, the result's eventoSolicitacaoId) equals the
// transfer's, or one of the two is unknown (a record of an older producer,
// a transfer created before the binding was stored). Each transfer takes
// its first bound result in batch (offset) order, as one-by-one handling
// would, if its status moves forward to it (transfer.CanMove: PENDENTE
// takes any result, RESERVADA only a hold's end); atualizada_em never goes
// below criada_em, whatever the clocks. A hold's capture ($9, the amount it
// settled) sets valor_liquidado_centavos when the amount is within the
// transfer's; a settlement sets titular_destino to the titular it names
// ($10). A result that is not bound (no transfer has its id, or the
// transfer has another request event) is held instead of applied or
// dropped (a held row already there for the event is kept as it is). It
// returns how many events were new, the event ids of the results that
// moved a transfer, the creation times of the transfers that left
// PENDENTE (the flow's end, for admission control), and the event ids of
// the results held.
//
// The batch's transfers are read only through "id = ANY($3)", which can only
// probe the primary key: joined with the unnested results, a plan made from
// statistics of a small table (the generic plan of a new deployment, kept
// while the table grows) hashes the whole table instead; hence the
// materialized target, which is also the transfers as they were before
// this statement.
const applyAllSQL = `
WITH input AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::bigint[],
        $10::text[]) WITH ORDINALITY AS u(event_id, transfer_id, status, reason, type, payload, binding, amount, holder, n)
), marked AS (
    INSERT INTO inbox_event (consumer, event_id)
    SELECT $1, i.event_id FROM input AS i ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING event_id
), target AS MATERIALIZED (
    SELECT t.id, t.evento_solicitacao_id, t.status FROM transferencia AS t WHERE t.id = ANY($3::uuid[])
), judged AS (
    SELECT i.*, t.id IS NOT NULL
        AND (i.binding IS NULL OR t.evento_solicitacao_id IS NULL OR i.binding = t.evento_solicitacao_id) AS bound
    FROM input AS i JOIN marked AS m ON m.event_id = i.event_id
    LEFT JOIN target AS t ON t.id = i.transfer_id
), first AS (
    SELECT DISTINCT ON (j.transfer_id) j.transfer_id, j.status, j.reason, j.amount, j.holder, j.event_id
    FROM judged AS j WHERE j.bound
    ORDER BY j.transfer_id, j.n
), moved AS (
    UPDATE transferencia AS t
    SET status = f.status, motivo_rejeicao = NULLIF(f.reason, ''), atualizada_em = greatest(now(), t.criada_em),
        valor_liquidado_centavos = CASE WHEN f.status = 'LIQUIDADA' AND t.captura = 'MANUAL'
            AND f.amount BETWEEN 1 AND t.valor_centavos THEN f.amount END,
        titular_destino = CASE WHEN f.status = 'LIQUIDADA' THEN NULLIF(f.holder, '') ELSE t.titular_destino END
    FROM first AS f, target AS g
    WHERE t.id = ANY($3::uuid[]) AND t.id = f.transfer_id AND g.id = t.id
      AND (t.status = 'PENDENTE' OR (t.status = 'RESERVADA' AND f.status IN ('LIQUIDADA', 'CANCELADA', 'EXPIRADA')))
    RETURNING f.event_id, t.criada_em, g.status = 'PENDENTE' AS ended
), held AS (
    INSERT INTO resultado_retido (evento_id, tipo, transferencia_id, status, motivo, payload, evento_solicitacao_id, valor_centavos,
                                  titular_destino)
    SELECT j.event_id, j.type, j.transfer_id, j.status, NULLIF(j.reason, ''), j.payload, j.binding, NULLIF(j.amount, 0),
        NULLIF(j.holder, '')
    FROM judged AS j
    WHERE NOT j.bound
    ORDER BY j.n
    ON CONFLICT (evento_id) DO NOTHING
    RETURNING evento_id
)
SELECT (SELECT count(*) FROM marked), ARRAY(SELECT event_id FROM moved), ARRAY(SELECT criada_em FROM moved WHERE ended),
    ARRAY(SELECT evento_id FROM held)`

// ApplyResults projects rs, a partition's results in offset order, in one
// transaction and one statement: all or nothing. Each transfer takes its
// first result when its status moves forward to it (transfer.CanMove); a
// result for a transfer already past it changes nothing; a result no visible transfer has with the request it was
// decided for is held (resultado_retido; see held.go). Only a rejection
// keeps its reason. out[i] is what rs[i] did; created are the creation
// times of the transfers that left PENDENTE (a hold's later end is not
// counted again), for admission control's view of the flow.
// It counts the results held and the duplicates.
//
// Deduplication, the projection's one rule: a result takes effect at most
// once per event id (eventoId). Its row (consumer, event id) in inbox_event
// is written by the statement that applies or holds it, in the same
// transaction; a result whose event id has a row, or repeats one earlier
// in rs, changes nothing (Unchanged) and counts in
// inbox_duplicates_total{consumer}. A concurrent delivery of the same
// event waits on the first one's row, then finds it. Rows are kept for
// INBOX_RETENTION (CleanupInboxLoop), longer than a record can come back.
func (s *Store) ApplyResults(ctx context.Context, rs []transfer.Result) (out []transfer.Outcome, created []time.Time, err error) {
	if len(rs) == 0 {
		return nil, nil, nil
	}
	var eventIDs, transferIDs [][16]byte
	var bindings []pgtype.UUID
	var amounts []int64
	var statuses, reasons, types, payloads, holders []string
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return nil, nil, err
		}
		eventIDs, transferIDs = append(eventIDs, r.EventID), append(transferIDs, r.TransferID)
		reason := ""
		if r.Status == transfer.StatusRejected {
			reason = r.Reason
		}
		statuses, reasons = append(statuses, string(r.Status)), append(reasons, reason)
		types, payloads = append(types, heldType(r)), append(payloads, heldPayload(r))
		bindings = append(bindings, requestEventID(r.RequestEventID))
		amounts = append(amounts, r.SettledCents)
		holders = append(holders, r.DestHolder)
	}
	var fresh int64
	var moved, held []uuid.UUID
	err = s.db.InTx(ctx, func(tx pgx.Tx) error {
		// One round trip: the statement on its generic plan (its plan is
		// the same for any batch; re-planned per execution, the planning
		// took longer than a batch of one).
		b := &pgx.Batch{}
		b.Queue(pg.GenericPlanSQL)
		b.Queue(applyAllSQL, s.consumer, eventIDs, transferIDs, statuses, reasons, types, payloads, bindings, amounts, holders).
			QueryRow(func(row pgx.Row) error { return row.Scan(&fresh, &moved, &created, &held) })
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("apply %d results: %w", len(rs), err)
	}
	s.metrics.held.Add(float64(len(held)))
	s.metrics.duplicates.Add(float64(len(rs) - int(fresh)))
	outcome := make(map[uuid.UUID]transfer.Outcome, len(moved)+len(held))
	for _, id := range moved {
		outcome[id] = transfer.Moved
	}
	for _, id := range held {
		outcome[id] = transfer.Held
	}
	out = make([]transfer.Outcome, len(rs))
	for i, r := range rs {
		out[i] = outcome[r.EventID]
		delete(outcome, r.EventID) // a repeated event id changes nothing
	}
	return out, created, nil
}

// heldType is the evento-tipo kept with a held result: the record's, or
// the one of its status when the caller gave none.
func heldType(r transfer.Result) string {
	switch {
	case r.Type != "":
		return r.Type
	case r.Status == transfer.StatusSettled:
		return events.TypeSettled
	default:
		return events.TypeRejected
	}
}

// heldPayload is the value kept with a held result: the record's JSON, or
// null when the caller has none. Bytes that are not UTF-8 (which Go's JSON
// decoder lets through) become U+FFFD, since a text column refuses them
// and the result must be held whatever its payload.
func heldPayload(r transfer.Result) string {
	if len(r.Payload) == 0 {
		return "null"
	}
	return strings.ToValidUTF8(string(r.Payload), "\uFFFD")
}

const cleanupSQL = `
DELETE FROM inbox_event WHERE ctid IN (
    SELECT ctid FROM inbox_event WHERE processed_at < now() - $1::interval LIMIT $2)`

// CleanupInbox deletes the processed-event rows (inbox_event) of every
// consumer older than retention, batch rows per statement, until none is
// left, and returns how many it deleted. Each statement is bounded
// (postgres.CallTimeout), as the outbox cleanup's are.
func (s *Store) CleanupInbox(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	var total int64
	for {
		dctx, cancel := context.WithTimeout(ctx, pg.CallTimeout)
		tag, err := s.db.Exec(dctx, cleanupSQL, retention.String(), batch)
		cancel()
		if err != nil {
			return total, fmt.Errorf("inbox cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// CleanupInboxLoop runs CleanupInbox every interval until ctx ends, like
// the outbox relay's cleanup of published events. It returns nil.
func (s *Store) CleanupInboxLoop(ctx context.Context, retention, interval time.Duration, log *slog.Logger) error {
	periodic.Every(ctx, periodic.Fixed(interval), func() {
		n, err := s.CleanupInbox(ctx, retention, 1000)
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "inbox cleanup failed", "err", err)
		} else if n > 0 {
			log.DebugContext(ctx, "inbox cleanup", "deleted", n)
		}
	})
	return nil
}
