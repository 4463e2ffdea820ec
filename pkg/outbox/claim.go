package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// claimed is one event owned by this relay for one send.
type claimed struct {
	id         uuid.UUID
	seq        int64
	topic      string
	key        string
	eventType  string
	payload    []byte
	headers    map[string]string
	attempts   int
	refusals   int
	isolate    bool
	enqueuedAt time.Time
	// holdOnly marks a DEAD row the logical relay's stream carried (an
	// operator moved it behind a requeued event of its key): not sent, it
	// holds its key back from there.
	holdOnly bool
}

// Claiming is serialised per database: a claim first takes this
// transaction-scoped advisory lock (the pair form, keyed by the table), so
// claims by any relay of the database run one after the other, and each
// claim's statement takes its snapshot after the previous claim committed its
// leases. A claim therefore never competes for rows with another claim (no
// SKIP LOCKED, no separate order check), and the whole claim is one statement
// sent with the lock in one round trip (a pgx batch runs as one implicit
// transaction). Claims are short (a few milliseconds for a thousand rows);
// sends and marks are not under the lock.
//
// The claim's commit does not wait for its WAL to reach disk
// (synchronous_commit off, for its own transaction only; see asyncCommitSQL).
//
// The claim also turns bitmap scans off for its own transaction: the outbox
// is a queue, its statistics always lag behind it, and with a few hundred
// rows estimated where tens of thousands wait, the planner reads every ready
// row through a bitmap and sorts them rather than walk the seq index until
// the batch is full, and matches the leased ids by ANDing bitmaps of
// thousands of rows.
const claimLockSQL = `SELECT pg_advisory_xact_lock(hashtext('outbox_event'), hashtext('claim')), set_config('enable_bitmapscan', 'off', true), set_config('synchronous_commit', 'off', true)`

// The claim statement leases and returns the events to send; their order is
// not the statement's, the caller sorts them by seq.
//
// Ready events are pending and due, or leased by a relay whose lease ended:
// its time ran out (a stuck relay), or its owner holds no liveness lock any
// more (a dead relay, see liveness.go: ownerDeadSQL asks the lock manager). An event
// may be sent only when every older unpublished event of its key is sent with
// it: $1 events are taken in seq order, skipping those whose key is held back
// by an older event that waits for a retry (retry_wait), is DEAD (until an
// operator requeues or discards it), or is validly leased to a relay
// (leased). Every older event of a taken event's key is then ready and not
// held either, so it precedes it in the scan and is taken too.
//
// The held keys are computed once per claim, each with its oldest held seq:
// waits (retry_wait and DEAD rows) and leases (validly leased rows), read
// through their small partial indexes. The candidates, walked in seq order
// on the unpublished index, are then checked against them with hashed
// subplans: "(topic, key) NOT IN (held keys)" is one hash probe per candidate,
// and only a candidate whose key is held compares its seq with the key's
// oldest held one. Each held set is read once, linear at worst, whatever the
// plan of its scan: checks per candidate (correlated subqueries) may be
// served from the seq-only unpublished index when the statistics were taken
// on an almost empty queue ("seq < e.seq": every older row of every key, for
// every candidate), quadratic in the backlog, so that a backlog would slow
// the claims that drain it (docs/design/architecture.md, "Why it is this
// way"). TestClaimReadsHeldRowsOncePerClaim checks the plan. The hashed
// subplans need the held sets to fit in
// work_mem (they are a few thousand rows in an outage, a few hundred bytes
// each); topic and key are NOT NULL, so NOT IN means "not among".
//
// The window of $2 rows bounds the scan when
// most ready rows belong to keys leased by a relay in flight (the other
// worker's batch): those keys are free again after its send, so stopping
// there delays nobody for long. Keys held by a retry do not count against the
// window, so a key that waits for a retry holds back only that key.
//
// Rows are only visible here once committed, and seq is taken at insert: an
// event with a lower seq that commits after this claim was committed after
// the claimed ones and goes later, which is its commit order. The events of
// one key are in seq order only when their producers are serialised on the
// key (same-key producers lock the business row first), see
// docs/design/architecture.md.
//
// Behind an event the broker refused (isolate), the key's later events stay
// back: the refused one travels alone.
//
// The lease names the claim ($3, unique per claim) and the relay's liveness
// key ($5, NULL for a relay run without its session: time-bound only). A
// relay whose own lock is not held (its session just dropped) leases
// nothing.
//
// The UPDATE repeats the readiness test, as a CASE that implies nothing
// about status, so that the planner finds the rows by primary key rather
// than walk the unpublished index comparing each row with each kept id (its
// plan whenever it believed that index nearly empty). It repeats the test
// because a row changed by a concurrent
// writer since the snapshot (the relay whose lease expired, marking it now)
// is re-read and dropped. The claim then returns how many rows it meant to
// take, and the caller releases the batch when some were dropped, since a
// dropped row's later events of its key must not go without it.
var claimSQL = `
WITH waits AS MATERIALIZED (
    SELECT h.topic, h.key, min(h.seq) AS seq
      FROM (SELECT w.topic, w.key, w.seq
              FROM outbox_event w
             WHERE w.status = 'PENDING' AND w.attempts > 0
               AND w.next_attempt_at > statement_timestamp()
            UNION ALL
            SELECT d.topic, d.key, d.seq
              FROM outbox_event d
             WHERE d.status = 'DEAD') h
     GROUP BY h.topic, h.key
), leases AS MATERIALIZED (
    SELECT l.topic, l.key, min(l.seq) AS seq
      FROM outbox_event l
     WHERE l.status = 'PROCESSING' AND l.locked_until > statement_timestamp()
       AND (l.lease_owner IS NULL OR NOT ` + ownerDeadSQL("l.lease_owner") + `)
     GROUP BY l.topic, l.key
), cand AS MATERIALIZED (
    SELECT r.id, r.seq, r.topic, r.key, r.isolate
      FROM (SELECT e.id, e.seq, e.topic, e.key, e.isolate
              FROM outbox_event e
             WHERE e.status IN ('PENDING', 'PROCESSING')
               AND ((e.status = 'PENDING' AND e.next_attempt_at <= statement_timestamp())
                 OR (e.status = 'PROCESSING' AND (e.locked_until <= statement_timestamp()
                      OR ` + ownerDeadSQL("e.lease_owner") + `)))
               AND ((e.topic, e.key) NOT IN (SELECT topic, key FROM waits)
                 OR e.seq < (SELECT w.seq FROM waits w WHERE w.topic = e.topic AND w.key = e.key))
             ORDER BY e.seq
             LIMIT $2) r
     WHERE (r.topic, r.key) NOT IN (SELECT topic, key FROM leases)
        OR r.seq < (SELECT l.seq FROM leases l WHERE l.topic = r.topic AND l.key = r.key)
     ORDER BY r.seq
     LIMIT $1
), kept AS (
    SELECT id FROM (
        SELECT id, bool_or(isolate) OVER (PARTITION BY topic, key ORDER BY seq
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS behind_isolated
          FROM cand) c
     WHERE behind_isolated IS NOT TRUE
       AND ($5::int IS NULL OR NOT ` + ownerDeadSQL("$5::int") + `)
), leased AS (
    UPDATE outbox_event e
       SET status = 'PROCESSING', locked_by = $3, lease_owner = $5::int,
           locked_until = statement_timestamp() + $4::interval
      FROM kept k
     WHERE e.id = k.id
       AND CASE e.status
           WHEN 'PENDING' THEN e.next_attempt_at <= statement_timestamp()
           WHEN 'PROCESSING' THEN e.locked_until <= statement_timestamp()
                OR ` + ownerDeadSQL("e.lease_owner") + `
           ELSE false END
    RETURNING e.id, e.seq, e.topic, e.key, e.event_type, e.payload, e.headers, e.attempts, e.refusals, e.isolate, e.enqueued_at
)
SELECT l.*, (SELECT count(*) FROM kept) FROM leased l`

// releaseSQL gives back leases a claim took but did not send.
const releaseSQL = `
UPDATE outbox_event AS o
   SET status = 'PENDING', locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[]) AS r(id)
 WHERE o.id = r.id AND o.status = 'PROCESSING' AND o.locked_by = $2`

// lease is one claim's hold on its rows.
type lease struct {
	// token is the claim's locked_by.
	token string
	// sendBy is when sending must stop: LeaseMargin before the lease ends,
	// measured from before the claim was sent (the database starts the
	// lease later than that).
	sendBy time.Time
}

// claim leases the next batch, in seq order. A claim that met a concurrent
// change (see claimSQL) is released and taken again, a few times at most.
func (r *Relay) claim(ctx context.Context) ([]claimed, lease, error) {
	for range 3 {
		l := lease{token: fmt.Sprintf("%s/%d", r.cfg.Name, r.claims.Add(1)),
			sendBy: time.Now().Add(r.cfg.Lease - LeaseMargin)}
		batch, raced, err := r.claimOnce(ctx, l.token)
		if err != nil || !raced {
			return batch, l, err
		}
		if err := r.release(ctx, batch, l.token); err != nil {
			return nil, lease{}, err
		}
	}
	return nil, lease{}, nil
}

// release gives back a claim's unsent events.
func (r *Relay) release(ctx context.Context, batch []claimed, token string) error {
	if len(batch) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	if err := r.execAsync(ctx, releaseSQL, ids, token); err != nil {
		// Still leased to the claim and unsent: another relay takes them
		// after the lease, or at once if this relay dies.
		return fmt.Errorf("release %d outbox events: %w", len(ids), err)
	}
	return nil
}

// claimOnce runs the claim; raced reports that rows it chose changed before
// it could lease them, in which case the batch must not be sent.
func (r *Relay) claimOnce(ctx context.Context, token string) (batch []claimed, raced bool, err error) {
	var owner *int32
	if k, ok := r.live.owner(); ok {
		owner = &k
	}
	b := &pgx.Batch{}
	b.Queue(claimLockSQL)
	b.Queue(claimSQL, r.cfg.BatchSize, 2*r.cfg.BatchSize, token, r.cfg.Lease.String(), owner)
	br := r.ob.db.SendBatch(ctx, b)
	defer func() {
		// Close reports the outcome of the implicit commit: without it the
		// leases may not exist, and sending would race another relay.
		if cerr := br.Close(); cerr != nil && err == nil {
			batch, raced, err = nil, false, fmt.Errorf("claim outbox events: %w", cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return nil, false, fmt.Errorf("claim outbox events: lock: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, fmt.Errorf("claim outbox events: %w", err)
	}
	defer rows.Close()
	var kept int64
	for rows.Next() {
		c, err := scanClaimed(rows, &kept)
		if err != nil {
			return nil, false, err
		}
		batch = append(batch, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("claim outbox events: %w", err)
	}
	// UPDATE ... RETURNING has no order; the send needs seq order.
	sort.Slice(batch, func(i, j int) bool { return batch[i].seq < batch[j].seq })
	return batch, int64(len(batch)) < kept, nil
}

// scanClaimed scans a row of an outbox event (id, seq, topic, key,
// event_type, payload, headers, attempts, refusals, isolate, enqueued_at)
// followed by the extra columns. A broken header map is dropped: it must
// not block the event.
func scanClaimed(rows pgx.Rows, extra ...any) (claimed, error) {
	var c claimed
	var headers []byte
	dest := append([]any{&c.id, &c.seq, &c.topic, &c.key, &c.eventType, &c.payload, &headers, &c.attempts, &c.refusals,
		&c.isolate, &c.enqueuedAt}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return claimed{}, fmt.Errorf("scan outbox event: %w", err)
	}
	if err := json.Unmarshal(headers, &c.headers); err != nil {
		c.headers = nil
	}
	return c, nil
}
