// Package postgres is the transfers service's PostgreSQL adapter: it stores
// transfers with their idempotency records, writes their events to the
// outbox in the same transaction, and is the projection's whole write:
// it applies settlement results, deduplicates them by event id, holds the
// results whose transfer it does not have, and counts what it does
// (projection.go, held.go, metrics.go).
package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/events"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

var _ transfer.Store = (*Store)(nil)

// DefaultClaimTimeout bounds how long a stalled process can hold a key in
// flight (see Store).
const DefaultClaimTimeout = 30 * time.Second

// Store is the PostgreSQL transfer.Store.
//
// In-flight detection: Create's statement first takes
// pg_try_advisory_xact_lock on the key inside its transaction, and inserts
// only if it got it. The lock is the claim: only one transaction per key can
// be past that line, a second one gets false at once (409, never a wait),
// and PostgreSQL releases the lock when the transaction ends in any way,
// including a crash of this process (the connection closes). A process that
// stalls with the transaction open (stopped, partitioned) is cut off by
// idle_in_transaction_session_timeout, set locally to the claim timeout, so
// a key is never stuck for longer. Two transfers for one key are impossible
// whatever happens: the key is the transfer's primary key.
type Store struct {
	db           *pg.DB
	outbox       Enqueuer
	claimTimeout string
	// consumer is the name the projection's processed events are recorded
	// under in inbox_event (its consumer group).
	consumer string
	metrics  *metrics
}

// Enqueuer writes outbox messages inside a transaction, to be published
// if and only if it commits: Enqueue at once, Queue on the caller's batch.
// *outbox.Outbox is the one the service runs with; Create queues its event
// last in its batch, the transaction's last write before the commit.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx pgx.Tx, msgs ...events.Message) error
	Queue(ctx context.Context, tx pgx.Tx, b *pgx.Batch, msgs ...events.Message) error
}

// NewStore returns a Store on db that enqueues events in ob, records the
// events it projects under consumer, and registers its metrics on reg
// (nil: not registered). claimTimeout <= 0 means DefaultClaimTimeout.
func NewStore(db *pg.DB, ob Enqueuer, consumer string, reg prometheus.Registerer, claimTimeout time.Duration) *Store {
	if claimTimeout <= 0 {
		claimTimeout = DefaultClaimTimeout
	}
	return &Store{
		db:           db,
		outbox:       ob,
		claimTimeout: strconv.FormatInt(max(claimTimeout.Milliseconds(), 1), 10),
		consumer:     consumer,
		metrics:      newMetrics(reg, consumer),
	}
}

// On returns a Store that works on db and shares s's outbox, consumer
// name and metrics: the projection's, on a pool of its own.
func (s *Store) On(db *pg.DB) *Store {
	c := *s
	c.db = db
	return &c
}

// claimSQL bounds the idle time of this transaction (SET LOCAL) and tries to
// take the key's transaction-scoped advisory lock, without waiting.
const claimSQL = `SELECT pg_try_advisory_xact_lock($1), set_config('idle_in_transaction_session_timeout', $2, true)`

// createSQL claims the key (see claimSQL) and, when it got the claim,
// inserts the transfer unless it exists; when it exists, it returns its
// idempotency record. One statement, so that the insert never runs without
// the claim: an insert of a key whose creation is in flight elsewhere would
// wait for that transaction (up to the claim timeout) instead of answering
// at once. Its first column says whether the claim was taken, its second
// whether the transfer was created. No row at all only if a creation of the
// key committed between this statement's snapshot and its claim: in flight
// for the caller, whose retry sees the row.
const createSQL = `
WITH claim AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock($16) AS ok, set_config('idle_in_transaction_session_timeout', $17, true)
), ins AS (
    INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status,
                               criada_em, atualizada_em, hash_requisicao, resposta_status, resposta_corpo, cliente_id, request_id,
                               evento_solicitacao_id, captura, expira_em)
    SELECT $1::uuid, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::timestamptz, $7::timestamptz, $8::bytea, $9::smallint,
           $10::bytea, $11::text, NULLIF($12::text, ''), $13::uuid, COALESCE(NULLIF($14::text, ''), 'AUTOMATICA'), $15::timestamptz
    FROM claim WHERE claim.ok
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
SELECT true, true, NULL::bytea, NULL::smallint, NULL::bytea, NULL::text FROM ins
UNION ALL
SELECT true, false, hash_requisicao, resposta_status, resposta_corpo, coalesce(cliente_id, '')
FROM transferencia, claim WHERE claim.ok AND id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
UNION ALL
SELECT false, false, NULL, NULL, NULL, NULL FROM claim WHERE NOT claim.ok`

// errNotCreated rolls back Create's transaction when the transfer was not
// created (a replay, or a key in flight): the event queued with the insert
// must not be published.
var errNotCreated = errors.New("transfer not created")

// Create implements transfer.Store. The claim, the insert and the event's
// enqueue travel in one batch, one round trip between BEGIN and COMMIT
// (each round trip holds a pool connection for a scheduling delay of both
// processes when the cores are busy); the event is enqueued before the
// insert's outcome is known, so a replay rolls the transaction back.
func (s *Store) Create(ctx context.Context, c transfer.Creation) (*transfer.Record, error) {
	t := c.Transfer
	var rec *transfer.Record
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		rec = nil
		var r createResult
		b := &pgx.Batch{}
		b.Queue(createSQL, t.ID, t.Source, t.Destination, t.AmountCents, t.Currency,
			string(t.Status), t.CreatedAt, c.Fingerprint[:], int16(c.Response.StatusCode), c.Response.Body, t.Client, truncateRequestID(t.RequestID), //nolint:gosec // HTTP status codes fit
			requestEventID(c.Event.ID), t.Capture, nullTime(t.ExpiresAt), lockKey(t.ID), s.claimTimeout).
			Query(r.read)
		if err := s.outbox.Queue(ctx, tx, b, c.Event); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("insert transfer %s: %w", t.ID, err)
		}
		if r.created {
			return nil
		}
		rec = r.rec // nil: the key is in flight
		return errNotCreated
	})
	switch {
	case errors.Is(err, errNotCreated) && rec == nil:
		return nil, transfer.ErrInProgress
	case errors.Is(err, errNotCreated):
		return rec, nil
	}
	return nil, err
}

// createResult is createSQL's answer: rec is the transfer's idempotency
// record when the key was claimed and its transfer exists.
type createResult struct {
	claimed, created bool
	rec              *transfer.Record
}

// read reads createSQL's row, if any.
func (r *createResult) read(rows pgx.Rows) error {
	for rows.Next() {
		var (
			fp     []byte
			status *int16
			body   []byte
			client *string
		)
		if err := rows.Scan(&r.claimed, &r.created, &fp, &status, &body, &client); err != nil {
			return err
		}
		if !r.claimed || r.created {
			continue
		}
		if len(fp) != len(transfer.Record{}.Fingerprint) || status == nil {
			return errors.New("corrupt idempotency record")
		}
		r.rec = &transfer.Record{Response: transfer.Response{StatusCode: int(*status), Body: body}}
		if client != nil {
			r.rec.Client = *client
		}
		copy(r.rec.Fingerprint[:], fp)
	}
	return rows.Err()
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

// requestEventID is id as a nullable UUID: NULL for uuid.Nil (unknown).
func requestEventID(id uuid.UUID) pgtype.UUID {
	return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil}
}

// nullTime is t, or NULL when zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
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
