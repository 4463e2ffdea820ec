// Package postgres is the transfers service's PostgreSQL adapter: it stores
// transfers with their idempotency records, writes their events to the
// outbox in the same transaction, and projects settlement results through
// the inbox, holding the results whose transfer it does not have.
package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/inbox"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

var _ transfer.Store = (*Store)(nil)

// DefaultClaimTimeout bounds how long a stalled process can hold a key in
// flight (see Store).
const DefaultClaimTimeout = 30 * time.Second

// Store is the PostgreSQL transfer.Store.
//
// In-flight detection: Create first takes pg_try_advisory_xact_lock on the
// key inside its transaction. The lock is the claim: only one transaction
// per key can be past that line, a second one gets false at once (409, never
// a wait), and PostgreSQL releases the lock when the transaction ends in any
// way, including a crash of this process (the connection closes). A process
// that stalls with the transaction open (stopped, partitioned) is cut off by
// idle_in_transaction_session_timeout, set locally to the claim timeout, so
// a key is never stuck for longer. Two transfers for one key are impossible
// whatever happens: the key is the transfer's primary key.
type Store struct {
	db           *pg.DB
	outbox       Enqueuer
	inbox        *inbox.Inbox
	claimTimeout string
	// settled, if set, is told the creation times of the transfers each
	// ApplyResults moved, after its commit (admission control's view of
	// the flow).
	settled func(created []time.Time)
}

// Enqueuer writes outbox messages inside a transaction, to be published
// if and only if it commits. *outbox.Outbox is the one the service runs
// with; Create's enqueue is its last write before the commit.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx pgx.Tx, msgs ...outbox.Message) error
}

// NewStore returns a Store on db that enqueues events in ob and records
// projected events in ib. claimTimeout <= 0 means DefaultClaimTimeout.
func NewStore(db *pg.DB, ob Enqueuer, ib *inbox.Inbox, claimTimeout time.Duration) *Store {
	if claimTimeout <= 0 {
		claimTimeout = DefaultClaimTimeout
	}
	return &Store{
		db:           db,
		outbox:       ob,
		inbox:        ib,
		claimTimeout: strconv.FormatInt(max(claimTimeout.Milliseconds(), 1), 10),
	}
}

// OnSettled makes ApplyResults tell f, after each commit, the creation
// times of the transfers it moved to their result. It returns s. Set it
// before the store is used.
func (s *Store) OnSettled(f func(created []time.Time)) *Store {
	s.settled = f
	return s
}

// claimSQL bounds the idle time of this transaction (SET LOCAL) and tries to
// take the key's transaction-scoped advisory lock, without waiting.
const claimSQL = `SELECT pg_try_advisory_xact_lock($1), set_config('idle_in_transaction_session_timeout', $2, true)`

// createSQL inserts the transfer unless it exists and, when it exists,
// returns its idempotency record. One row in either case; none only if a
// row appeared that this statement's snapshot cannot see, which the claim
// rules out.
const createSQL = `
WITH ins AS (
    INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status,
                               criada_em, atualizada_em, hash_requisicao, resposta_status, resposta_corpo, cliente_id, request_id,
                               evento_solicitacao_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, NULLIF($12, ''), $13)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
SELECT true, NULL::bytea, NULL::smallint, NULL::bytea, NULL::text FROM ins
UNION ALL
SELECT false, hash_requisicao, resposta_status, resposta_corpo, coalesce(cliente_id, '')
FROM transferencia WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// Create implements transfer.Store.
func (s *Store) Create(ctx context.Context, c transfer.Creation) (*transfer.Record, error) {
	t := c.Transfer
	var rec *transfer.Record
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		rec = nil
		var claimed bool
		var timeout string
		if err := tx.QueryRow(ctx, claimSQL, lockKey(t.ID), s.claimTimeout).Scan(&claimed, &timeout); err != nil {
			return fmt.Errorf("claim key %s: %w", t.ID, err)
		}
		if !claimed {
			return transfer.ErrInProgress
		}
		rows, err := tx.Query(ctx, createSQL, t.ID, t.Source, t.Destination, t.AmountCents, t.Currency,
			string(t.Status), t.CreatedAt, c.Fingerprint[:], int16(c.Response.StatusCode), c.Response.Body, t.Client, truncateRequestID(t.RequestID), //nolint:gosec // HTTP status codes fit
			requestEventID(c.Event.ID))
		if err != nil {
			return fmt.Errorf("insert transfer %s: %w", t.ID, err)
		}
		var (
			created bool
			found   bool
			fp      []byte
			status  *int16
			body    []byte
			client  *string
		)
		for rows.Next() {
			found = true
			if err := rows.Scan(&created, &fp, &status, &body, &client); err != nil {
				rows.Close()
				return fmt.Errorf("insert transfer %s: %w", t.ID, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("insert transfer %s: %w", t.ID, err)
		}
		switch {
		case !found:
			// Not ours and not visible: another creation committed between
			// the claim and this statement, which the claim forbids. Report
			// it as in flight; a retry sees the row.
			return transfer.ErrInProgress
		case !created:
			if len(fp) != len(transfer.Record{}.Fingerprint) || status == nil {
				return fmt.Errorf("transfer %s: corrupt idempotency record", t.ID)
			}
			rec = &transfer.Record{Response: transfer.Response{StatusCode: int(*status), Body: body}}
			if client != nil {
				rec.Client = *client
			}
			copy(rec.Fingerprint[:], fp)
			return nil // nothing written: the commit only releases the claim
		}
		return s.outbox.Enqueue(ctx, tx, c.Event)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

const getSQL = `SELECT ` + transferColumns + ` FROM transferencia WHERE id = $1`

// Get implements transfer.Store. The transfer carries its request id, for
// operators.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (transfer.Transfer, error) {
	t, err := scanTransfer(s.db.QueryRow(ctx, getSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return transfer.Transfer{}, fmt.Errorf("get transfer %s: %w", id, transfer.ErrNotFound)
	}
	if err != nil {
		return transfer.Transfer{}, fmt.Errorf("get transfer %s: %w", id, err)
	}
	return t, nil
}

// applyAllSQL is the projection, with the inbox marks, in one statement:
// the results whose event id the inbox had not seen ($1 is the consumer)
// are marked; of those, a result is bound to a transfer when the transfer
// exists and nothing contradicts that it was decided for that transfer's
// request: its request event id ($8, the result's eventoSolicitacaoId)
// equals the transfer's, or one of the two is unknown (a record of an
// older producer, a transfer created before the binding was stored). Each
// transfer takes its first bound result in batch (offset) order, as
// one-by-one handling would, since a result lands only on a PENDENTE
// transfer; atualizada_em never goes below criada_em, whatever the clocks.
// A result that is not bound (no transfer has its id, or the transfer has
// another request event) is held instead of applied or dropped (a held row
// already there for the event is kept as it is). It returns how many
// events were new, the event ids of the results that moved a transfer with
// those transfers' creation times, and the event ids of the results held.
//
// The batch's transfers are read only through "id = ANY($3)", which can only
// probe the primary key: joined with the unnested results, a plan made from
// statistics of a small table (the generic plan of a new deployment, kept
// while the table grows) hashes the whole table instead; hence the
// materialized target.
const applyAllSQL = `
WITH input AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[]) WITH ORDINALITY
        AS u(event_id, transfer_id, status, reason, type, payload, binding, n)
), marked AS (
    INSERT INTO inbox_event (consumer, event_id)
    SELECT $1, i.event_id FROM input AS i ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING event_id
), target AS MATERIALIZED (
    SELECT t.id, t.evento_solicitacao_id FROM transferencia AS t WHERE t.id = ANY($3::uuid[])
), judged AS (
    SELECT i.*, t.id IS NOT NULL
        AND (i.binding IS NULL OR t.evento_solicitacao_id IS NULL OR i.binding = t.evento_solicitacao_id) AS bound
    FROM input AS i JOIN marked AS m ON m.event_id = i.event_id
    LEFT JOIN target AS t ON t.id = i.transfer_id
), first AS (
    SELECT DISTINCT ON (j.transfer_id) j.transfer_id, j.status, j.reason, j.event_id
    FROM judged AS j WHERE j.bound
    ORDER BY j.transfer_id, j.n
), moved AS (
    UPDATE transferencia AS t
    SET status = f.status, motivo_rejeicao = NULLIF(f.reason, ''), atualizada_em = greatest(now(), t.criada_em)
    FROM first AS f
    WHERE t.id = ANY($3::uuid[]) AND t.id = f.transfer_id AND t.status = 'PENDENTE'
    RETURNING f.event_id, t.criada_em
), held AS (
    INSERT INTO resultado_retido (evento_id, tipo, transferencia_id, status, motivo, payload, evento_solicitacao_id)
    SELECT j.event_id, j.type, j.transfer_id, j.status, NULLIF(j.reason, ''), j.payload, j.binding
    FROM judged AS j
    WHERE NOT j.bound
    ORDER BY j.n
    ON CONFLICT (evento_id) DO NOTHING
    RETURNING evento_id
)
SELECT (SELECT count(*) FROM marked), ARRAY(SELECT event_id FROM moved), ARRAY(SELECT criada_em FROM moved),
    ARRAY(SELECT evento_id FROM held)`

// ApplyResults implements transfer.Store: one transaction, one statement,
// the inbox marks included. A result whose event id repeats an earlier one
// of rs is a duplicate, as its redelivery would be. Only a rejection keeps
// its reason.
func (s *Store) ApplyResults(ctx context.Context, rs []transfer.Result) ([]transfer.Outcome, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	seen := make(map[uuid.UUID]bool, len(rs))
	var eventIDs, transferIDs [][16]byte
	var bindings []pgtype.UUID
	var statuses, reasons, types, payloads []string
	for _, r := range rs {
		if seen[r.EventID] {
			continue
		}
		seen[r.EventID] = true
		eventIDs, transferIDs = append(eventIDs, r.EventID), append(transferIDs, r.TransferID)
		reason := ""
		if r.Status == transfer.StatusRejected {
			reason = r.Reason
		}
		statuses, reasons = append(statuses, string(r.Status)), append(reasons, reason)
		types, payloads = append(types, heldType(r)), append(payloads, heldPayload(r))
		bindings = append(bindings, requestEventID(r.RequestEventID))
	}
	var fresh int64
	var moved, held []uuid.UUID
	var created []time.Time
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		// One round trip: the statement on its generic plan (its plan is
		// the same for any batch; re-planned per execution, the planning
		// took longer than a batch of one).
		b := &pgx.Batch{}
		b.Queue(pg.GenericPlanSQL)
		b.Queue(applyAllSQL, s.inbox.Consumer(), eventIDs, transferIDs, statuses, reasons, types, payloads, bindings).
			QueryRow(func(row pgx.Row) error { return row.Scan(&fresh, &moved, &created, &held) })
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("apply %d results: %w", len(rs), err)
	}
	if s.settled != nil {
		s.settled(created)
	}
	s.inbox.CountDuplicates(len(rs) - int(fresh))
	outcome := make(map[uuid.UUID]transfer.Outcome, len(moved)+len(held))
	for _, id := range moved {
		outcome[id] = transfer.Moved
	}
	for _, id := range held {
		outcome[id] = transfer.Held
	}
	out := make([]transfer.Outcome, len(rs))
	for i, r := range rs {
		out[i] = outcome[r.EventID]
		delete(outcome, r.EventID) // a repeated event id changes nothing
	}
	return out, nil
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

// requestEventID is id as a nullable UUID: NULL for uuid.Nil (unknown).
func requestEventID(id uuid.UUID) pgtype.UUID {
	return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil}
}

// lockKey folds a key into the 64-bit advisory lock space. Two keys that
// fold alike only make one of them wait for a retry (409), never merge.
func lockKey(id uuid.UUID) int64 {
	return int64(binary.BigEndian.Uint64(id[:8]) ^ binary.BigEndian.Uint64(id[8:])) //nolint:gosec // a bit pattern
}

// truncateRequestID keeps a request id within the column's 128 characters
// (pkg/httpapi already bounds the ids it accepts).
func truncateRequestID(id string) string {
	if len(id) > 128 {
		return id[:128]
	}
	return id
}
