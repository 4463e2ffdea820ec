package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
)

// Reading is one read of the outbox: every figure is the database's, so
// every instance of the service reads the same, whichever relay mode runs
// and whichever instance streams or holds which partitions.
type Reading struct {
	// Pending is the number of events the relay can send, and OldestAge
	// how long the oldest of them has waited (by the database's clock; 0
	// when none): pending or leased, not held back behind a DEAD event of
	// their key. With the logical relay, rows stay PENDING until its next
	// settle, so both include what it sent since then
	// (Config.PublishDelay).
	Pending   int64
	OldestAge time.Duration
	// ReadyAge is how long the oldest event the relay can send right now
	// has waited: of those, not one waiting for a retry nor behind one of
	// its key. Old while OldestAge is, the relay is behind on what it
	// could send (it is the bottleneck); young, the backlog is one key's
	// retry (a partition's leader election) while the rest flows.
	ReadyAge time.Duration
	// Enqueued counts the events ever enqueued (the position of the seq
	// identity), Left those of them no longer waiting (published, or set
	// DEAD or discarded): between two readings, their differences are
	// what all instances admitted and what the relay took, whichever
	// instance did either. The sequence moves at insert, before commit:
	// an insert in flight counts as left until it commits, so the
	// differences are off by the change in what is in flight (a few
	// transactions), and a rolled-back insert (a replayed POST's: its event
	// is queued before the outcome is known) counts as admitted and left.
	Enqueued, Left int64
}

// BacklogReader reads the outbox; *Backlog is one.
type BacklogReader interface {
	Backlog(ctx context.Context) (Reading, error)
}

// Backlog reads the outbox backlog from the database.
type Backlog struct {
	db *postgres.DB
}

var _ BacklogReader = (*Backlog)(nil)

// NewBacklog returns the reader of db's outbox.
func NewBacklog(db *postgres.DB) *Backlog { return &Backlog{db: db} }

// sendableSQL reads the unpublished events (PENDING or PROCESSING), those
// of them a relay can send, and the age of the oldest of those. An event
// behind an older DEAD event of its topic and key is held back (the rule
// both relays follow: the claim's waits, the logical relay's settle): it
// waits for an operator (requeue or discard), not for the flow, so it is
// left out of Pending and OldestAge, where one dead event would keep its
// key's later events, and their growing age, until someone acts. An event
// waiting for a retry is counted: the relay sends it when its wait ends.
// Enqueued is the seq identity's position (pg_sequence_last_value: one
// read of the sequence, not of the table).
//
// The unpublished rows are read through their partial index
// (outbox_event_unpublished), the DEAD rows and those waiting for a retry
// through theirs; each join groups its rows by key and hashes them once,
// then probes that hash with each unpublished row (Hash Left Join): linear
// in the backlog plus the DEAD rows, with no sort. Nested loops, merge
// joins and sorts are turned off for the statement's own transaction
// (planSQL), as the claim turns bitmap scans off: the outbox is a queue
// whose statistics lag behind it, and with one row estimated on each side
// the planner picks a nested loop that reads every DEAD row for every
// unpublished one, quadratic when an outage left thousands of each.
// TestBacklogPlanIsLinear reads the plan.
const sendableSQL = `
SELECT count(*) FILTER (WHERE d.seq IS NULL),
       COALESCE(EXTRACT(EPOCH FROM now() - min(e.enqueued_at) FILTER (WHERE d.seq IS NULL)), 0)::float8,
       COALESCE(EXTRACT(EPOCH FROM now() - min(e.enqueued_at) FILTER (WHERE d.seq IS NULL AND w.seq IS NULL)), 0)::float8,
       count(*),
       COALESCE(pg_sequence_last_value(pg_get_serial_sequence('outbox_event', 'seq')::regclass), 0)
  FROM outbox_event e
  LEFT JOIN (SELECT topic, key, min(seq) AS seq FROM outbox_event WHERE status = 'DEAD' GROUP BY topic, key) d
         ON d.topic = e.topic AND d.key = e.key AND d.seq < e.seq
  LEFT JOIN (SELECT topic, key, min(seq) AS seq FROM outbox_event
              WHERE status = 'PENDING' AND attempts > 0 AND next_attempt_at > now() GROUP BY topic, key) w
         ON w.topic = e.topic AND w.key = e.key AND w.seq <= e.seq
 WHERE e.status IN ('PENDING', 'PROCESSING')`

// planSQL sets the plan's bounds for the transaction of the batch that
// reads the backlog (see sendableSQL).
const planSQL = `SELECT set_config('enable_nestloop', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_sort', 'off', true)`

// Backlog reads the outbox's figures (see Reading).
func (b *Backlog) Backlog(ctx context.Context) (Reading, error) {
	var r Reading
	var age, ready float64
	var unpublished int64
	// One round trip, one implicit transaction: the settings hold for the
	// statement and end with it.
	batch := &pgx.Batch{}
	batch.Queue(planSQL)
	batch.Queue(sendableSQL).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.Pending, &age, &ready, &unpublished, &r.Enqueued)
	})
	if err := b.db.SendBatch(ctx, batch).Close(); err != nil {
		return Reading{}, fmt.Errorf("read the outbox backlog: %w", err)
	}
	r.OldestAge = time.Duration(age * float64(time.Second))
	r.ReadyAge = time.Duration(ready * float64(time.Second))
	r.Left = r.Enqueued - unpublished
	return r, nil
}
