package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
)

// slotLockSQL serialises slot creation and the drain between the relays of
// a cluster (slot names are cluster-wide): a second instance waits until
// the first has drained, then finds the slot ready.
const slotLockSQL = `SELECT pg_advisory_lock(hashtext('outbox_logical_slot'), hashtext($1))`

// setupTimeout bounds ensureSlot.
const setupTimeout = 3 * postgres.CallTimeout

const slotUnlockSQL = `SELECT pg_advisory_unlock(hashtext('outbox_logical_slot'), hashtext($1))`

// slotName is the configured slot, or one derived from the database name:
// slots are per cluster, and every service database needs its own.
func (r *LogicalRelay) slotName() string {
	if r.cfg.Slot != DefaultSlot {
		return r.cfg.Slot
	}
	return SlotFor(r.ob.db.Config().ConnConfig.Database, r.cfg.Slot)
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]`)

// SlotFor is the slot name the logical relay uses for database db under
// the default prefix: "<prefix>_<db>", lower case, other characters as _,
// at most 63 bytes.
func SlotFor(db, prefix string) string {
	s := prefix + "_" + notIdent.ReplaceAllString(strings.ToLower(db), "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// ensureSlot creates the publication and the slot when missing. It reports
// whether the table must be drained into the slot first: the slot is new,
// or its creator died before it finished draining.
//
// It is bounded (setupTimeout): a hung server (a SIGSTOPped primary) must
// not hold the relay, which then tries again and, through a multi-host
// URL, reaches the promoted standby. A wait for another instance's drain
// past the bound is tried again too.
func (r *LogicalRelay) ensureSlot(ctx context.Context) (drain bool, err error) {
	slot := r.slotName()
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	conn, err := r.ob.db.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("logical relay setup: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, slotLockSQL, slot); err != nil {
		return false, fmt.Errorf("logical relay setup: lock: %w", err)
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), postgres.CallTimeout)
		defer ucancel()
		if _, uerr := conn.Exec(uctx, slotUnlockSQL, slot); uerr != nil {
			conn.Conn().PgConn().Close(uctx) //nolint:errcheck // the lock goes with the connection
		}
	}()
	var pub bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, r.cfg.Publication).Scan(&pub); err != nil {
		return false, fmt.Errorf("logical relay setup: %w", err)
	}
	if !pub {
		sql := "CREATE PUBLICATION " + pgx.Identifier{r.cfg.Publication}.Sanitize() + " FOR TABLE outbox_event WITH (publish = 'insert')"
		if _, err := conn.Exec(ctx, sql); err != nil && postgres.Code(err) != "42710" {
			return false, fmt.Errorf("logical relay setup: create publication: %w", err)
		}
	}
	var exists bool
	var otherDB string
	err = conn.QueryRow(ctx, `SELECT true, COALESCE(database, '') FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&exists, &otherDB)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("logical relay setup: %w", err)
	}
	if exists && otherDB != r.ob.db.Config().ConnConfig.Database {
		return false, fmt.Errorf("logical relay setup: slot %s belongs to database %q: give this database's relay its own OUTBOX_LOGICAL_SLOT", slot, otherDB)
	}
	if !exists {
		// The slot first, then max(seq): every event inserted after the
		// slot exists commits after it and is streamed; every event with
		// a seq up to max_seq may have committed before it and is drained.
		// An event in both is sent twice, the drained copy first.
		if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
			return false, fmt.Errorf("logical relay setup: create slot %s: %w", slot, err)
		}
		if _, err := conn.Exec(ctx, `
INSERT INTO outbox_relay_slot (slot, max_seq) SELECT $1, COALESCE(max(seq), 0) FROM outbox_event
ON CONFLICT (slot) DO UPDATE SET max_seq = EXCLUDED.max_seq, drained = false, created_at = now()`, slot); err != nil {
			return false, fmt.Errorf("logical relay setup: record slot %s: %w", slot, err)
		}
		r.lm.SlotsCreated.Inc()
		return true, nil
	}
	var drained bool
	err = conn.QueryRow(ctx, `SELECT drained FROM outbox_relay_slot WHERE slot = $1`, slot).Scan(&drained)
	if errors.Is(err, pgx.ErrNoRows) {
		// A slot created by hand, or whose record was lost: draining
		// sends duplicates at worst, never loses.
		if _, err := conn.Exec(ctx, `INSERT INTO outbox_relay_slot (slot, max_seq) SELECT $1, COALESCE(max(seq), 0) FROM outbox_event`, slot); err != nil {
			return false, fmt.Errorf("logical relay setup: record slot %s: %w", slot, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("logical relay setup: %w", err)
	}
	return !drained, nil
}

// dropSlot drops this relay's slot and its record (a failed drain), both
// within postgres.CallTimeout.
func (r *LogicalRelay) dropSlot(ctx context.Context) error {
	slot := r.slotName()
	ctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	defer cancel()
	if _, err := r.ob.db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot); err != nil {
		return err
	}
	_, err := r.ob.db.Exec(ctx, `DELETE FROM outbox_relay_slot WHERE slot = $1`, slot)
	return err
}

// drainSQL reads the next events committed before the slot existed, in seq
// order, skipping keys held back by a DEAD event.
const drainSQL = `
SELECT e.id, e.seq, e.topic, e.key, e.event_type, e.payload, e.headers, e.attempts, e.refusals, e.isolate, e.enqueued_at
  FROM outbox_event e
 WHERE e.status IN ('PENDING', 'PROCESSING') AND e.seq > $1 AND e.seq <= $2
   AND NOT EXISTS (SELECT 1 FROM outbox_event d
                    WHERE d.status = 'DEAD' AND d.topic = e.topic AND d.key = e.key AND d.seq < e.seq)
 ORDER BY e.seq LIMIT $3`

const markPublishedSQL = `
UPDATE outbox_event AS o SET status = 'PUBLISHED', published_at = now(), locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[]) AS p(id)
 WHERE o.id = p.id AND o.status IN ('PENDING', 'PROCESSING')`

// drain publishes the events the table holds from before the slot, in seq
// order, and records that it is done. Polling relays must be stopped
// first: a row one of them has leased is sent by both (a duplicate). Each
// statement is bounded (postgres.CallTimeout): on a hung server the drain
// fails, and the relay tries again.
func (r *LogicalRelay) drain(ctx context.Context) error {
	slot := r.slotName()
	var maxSeq int64
	qctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	err := r.ob.db.QueryRow(qctx, `SELECT max_seq FROM outbox_relay_slot WHERE slot = $1`, slot).Scan(&maxSeq)
	cancel()
	if err != nil {
		return err
	}
	var after int64
	held := map[topicKey]bool{}
	defer r.oldestUnconfirmed.Store(nil)
	for {
		batch, err := r.readDrain(ctx, after, maxSeq)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			break
		}
		after = batch[len(batch)-1].seq
		oldest := batch[0].enqueuedAt
		for _, c := range batch {
			oldest = minTime(oldest, c.enqueuedAt)
		}
		r.oldestUnconfirmed.Store(&oldest)
		acked, err := r.publish(ctx, batch, held)
		if err != nil {
			return err
		}
		r.oldestUnconfirmed.Store(nil)
		if len(acked) > 0 {
			mctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
			_, err := r.ob.db.Exec(mctx, markPublishedSQL, acked)
			cancel()
			if err != nil {
				return fmt.Errorf("mark drained events published: %w", err)
			}
		}
	}
	uctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	defer cancel()
	_, err = r.ob.db.Exec(uctx, `UPDATE outbox_relay_slot SET drained = true WHERE slot = $1`, slot)
	return err
}

func (r *LogicalRelay) readDrain(ctx context.Context, after, maxSeq int64) ([]claimed, error) {
	ctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	defer cancel()
	rows, err := r.ob.db.Query(ctx, drainSQL, after, maxSeq, r.poll.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("read outbox events to drain: %w", err)
	}
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		c, err := scanClaimed(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// LeftBehindSlot reports whether database db's logical relay slot exists
// (prefix as LogicalConfig.Slot): a service running the polling relay calls
// it at start, since a slot nobody reads holds WAL for good.
func LeftBehindSlot(ctx context.Context, db *postgres.DB, cfg LogicalConfig) (string, bool, error) {
	cfg = cfg.withDefaults()
	slot := cfg.Slot
	if slot == DefaultSlot {
		slot = SlotFor(db.Config().ConnConfig.Database, slot)
	}
	var found bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&found)
	return slot, found, err
}

// topicKey is one ordering key of the outbox.
type topicKey struct{ topic, key string }

// keyHeld reports whether the key still has a DEAD event older than seq.
func (r *LogicalRelay) keyHeld(ctx context.Context, k topicKey, seq int64) (bool, error) {
	var held bool
	err := r.ob.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_event WHERE status = 'DEAD' AND topic = $1 AND key = $2 AND seq < $3)`,
		k.topic, k.key, seq).Scan(&held)
	return held, err
}

// markDead sets an event aside as DEAD; its key is held back from now on.
func (r *LogicalRelay) markDead(ctx context.Context, c claimed, attempts int, cause error) error {
	_, err := r.ob.db.Exec(ctx, `
UPDATE outbox_event SET status = 'DEAD', attempts = attempts + $2, refusals = refusals + $2, last_error = $3, isolate = true,
       locked_by = NULL, locked_until = NULL, lease_owner = NULL
 WHERE id = $1 AND status IN ('PENDING', 'PROCESSING')`, c.id, attempts, truncate(cause.Error(), 2000))
	return err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
