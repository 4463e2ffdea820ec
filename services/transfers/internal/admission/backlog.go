package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
)

// Backlog reads the outbox backlog the relay can send, from the database:
// every instance of the service reads the same figure, whichever relay
// mode runs and whichever instance streams or holds which partitions.
type Backlog struct {
	db *postgres.DB
}

var _ outbox.BacklogReader = (*Backlog)(nil)

// NewBacklog returns the reader of db's outbox backlog.
func NewBacklog(db *postgres.DB) *Backlog { return &Backlog{db: db} }

// sendableSQL counts the unpublished events a relay can send, and the age
// of the oldest: PENDING or PROCESSING, and not held back behind a DEAD
// event of their key (an older DEAD event of the same topic and key, the
// rule both relays follow: the claim's waits and the logical relay's
// settle). Such an event waits for an operator (requeue or discard), not
// for the flow: counted, one dead event would keep its key's later events
// in the backlog, and their age growing, until someone acts. An event
// waiting for a retry is counted: the relay sends it when its wait ends.
//
// The unpublished rows are read through their partial index
// (outbox_event_unpublished) and the DEAD rows through theirs; the anti
// join hashes the DEAD rows once and probes that hash with each
// unpublished row (Hash Anti Join): linear in the backlog plus the DEAD
// rows, with no sort. Nested loops and merge joins are turned off for the
// statement's own transaction (planSQL), as the claim turns bitmap scans
// off: the outbox is a queue whose statistics lag behind it, and with one
// row estimated on each side the planner picks a nested loop that reads
// every DEAD row for every unpublished one, quadratic when an outage left
// thousands of each. TestBacklogPlanIsLinear reads the plan.
const sendableSQL = `
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(e.enqueued_at)), 0)::float8
  FROM outbox_event e
 WHERE e.status IN ('PENDING', 'PROCESSING')
   AND NOT EXISTS (SELECT 1 FROM outbox_event d
                    WHERE d.status = 'DEAD' AND d.topic = e.topic AND d.key = e.key AND d.seq < e.seq)`

// planSQL sets the plan's bounds for the transaction of the batch that
// reads the backlog (see sendableSQL).
const planSQL = `SELECT set_config('enable_nestloop', 'off', true), set_config('enable_mergejoin', 'off', true)`

// Backlog implements outbox.BacklogReader: Pending is the number of
// sendable events, OldestAge the age of the oldest of them by the
// database's clock. With the logical relay, rows stay PENDING until its
// next settle marks them PUBLISHED, so both figures include what it sent
// since then (Config.PublishDelay discounts that from the age).
func (b *Backlog) Backlog(ctx context.Context) (outbox.Backlog, error) {
	var out outbox.Backlog
	var age float64
	// One round trip, one implicit transaction: the settings hold for the
	// statement and end with it.
	batch := &pgx.Batch{}
	batch.Queue(planSQL)
	batch.Queue(sendableSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&out.Pending, &age) })
	if err := b.db.SendBatch(ctx, batch).Close(); err != nil {
		return outbox.Backlog{}, fmt.Errorf("read the outbox backlog: %w", err)
	}
	out.OldestAge = time.Duration(age * float64(time.Second))
	return out, nil
}
