package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
)

// Publisher sends records to Kafka; *kafka.Writer from broker.NewWriter is
// the production one. WriteMessages returns nil when every record was
// acknowledged, or kafka.WriteErrors (aligned with msgs) or another error.
type Publisher = broker.Publisher

// RelayConfig tunes a relay. Zero values take the defaults documented on
// each field.
type RelayConfig struct {
	// Name identifies this relay in logs and in locked_by, where each claim
	// adds its own number ("<name>/<n>"); default host-pid-random.
	Name string
	// BatchSize is how many events one claim takes; default 500.
	BatchSize int
	// Workers is how many claim-send-mark loops run at once; default 2.
	Workers int
	// Lease is the longest a claim is owned by a live relay before another
	// relay may reclaim it; default 30s. A dead relay's claims are free at
	// once (see liveness.go), so the lease only bounds a relay that is alive
	// but stuck. The relay never sends past its lease: the sends of a batch
	// stop LeaseMargin before it ends, and what is left goes back to the
	// queue. It must be at least SendTimeout + LeaseMargin + 1s (Validate).
	Lease time.Duration
	// SendTimeout bounds one publish call; default 15s.
	SendTimeout time.Duration
	// PollInterval is the fallback scan when no wake-up arrives, and so the
	// longest a dead relay's claims wait to be taken over; default 500ms.
	PollInterval time.Duration
	// MaxAttempts is how many times the broker may refuse an event itself
	// (too large, corrupt, invalid: see Refused) before it turns DEAD;
	// default 12. Other failures (broker unreachable, leader moving,
	// authorization, unknown topic) are retried at the capped delay for as
	// long as they last and never count toward DEAD: an outage never kills
	// events, it shows as the age of the oldest pending event and as
	// outbox_send_failures_total{cause}.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the exponential retry delay (with
	// jitter); defaults 500ms and 60s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Retention is how long PUBLISHED rows are kept; default 7 days.
	Retention time.Duration
	// CleanupInterval and CleanupBatch pace the deletion of old published
	// rows; defaults 1 minute and 1000 rows per statement.
	CleanupInterval time.Duration
	CleanupBatch    int
	// StatsInterval is how often the gauges are refreshed; default 2s.
	StatsInterval time.Duration
	// DisableListen turns off LISTEN (cross-process wake-ups).
	DisableListen bool
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.BatchSize, 500)
	def(&c.Workers, 2)
	def(&c.MaxAttempts, 12)
	def(&c.CleanupBatch, 1000)
	defD(&c.Lease, 30*time.Second)
	defD(&c.SendTimeout, 15*time.Second)
	defD(&c.PollInterval, 500*time.Millisecond)
	defD(&c.BackoffBase, 500*time.Millisecond)
	defD(&c.BackoffMax, 60*time.Second)
	defD(&c.Retention, 7*24*time.Hour)
	defD(&c.CleanupInterval, time.Minute)
	defD(&c.StatsInterval, 2*time.Second)
	return c
}

// LeaseMargin is how long before its lease ends a relay stops sending the
// batch: room for the last send to be cut off and for the marks.
const LeaseMargin = time.Second

// Validate reports a configuration under which a relay could still be
// sending when its lease ends, so that another relay would send the same
// events again, possibly ahead of the older ones of their key. Services
// refuse to start with it. Zero values are read as their defaults.
func (c RelayConfig) Validate() error {
	d := c.withDefaults()
	if min := d.SendTimeout + LeaseMargin + time.Second; d.Lease < min {
		return fmt.Errorf("outbox relay: lease %v must be at least the send timeout %v + %v (OUTBOX_LEASE >= OUTBOX_SEND_TIMEOUT + %v)",
			d.Lease, d.SendTimeout, LeaseMargin+time.Second, LeaseMargin+time.Second)
	}
	if d.BackoffBase > d.BackoffMax {
		return fmt.Errorf("outbox relay: backoff base %v exceeds backoff max %v", d.BackoffBase, d.BackoffMax)
	}
	return nil
}

// Relay publishes committed outbox events. Any number of relays, in one
// process or many, may run against one database.
type Relay struct {
	ob      *Outbox
	pub     Publisher
	cfg     RelayConfig
	log     *slog.Logger
	metrics *Metrics
	live    *liveness
	// claims numbers this relay's claims; each claim's lease is
	// "<name>/<n>", so that no two claims, even of one relay, share one.
	claims atomic.Uint64
	// running is set by Run: claims then need the liveness session.
	running atomic.Bool
}

// NewRelay returns a relay publishing ob's events through pub. metrics may be
// nil. Run refuses a configuration that Validate refuses.
func NewRelay(ob *Outbox, pub Publisher, cfg RelayConfig, log *slog.Logger, metrics *Metrics) *Relay {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	cfg = cfg.withDefaults()
	return &Relay{ob: ob, pub: pub, cfg: cfg, log: log, metrics: metrics,
		live: newLiveness(ob.db.Config().ConnConfig, log, cfg.Name)}
}

// Name returns the relay's lease owner name.
func (r *Relay) Name() string { return r.cfg.Name }

// Run publishes until ctx is cancelled, then lets the batches in hand finish
// and returns nil. It also runs the NOTIFY listener and sender, the cleanup
// of old published rows and the gauges.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	r.running.Store(true)
	var wg sync.WaitGroup
	wake := make(chan struct{}, r.cfg.Workers)
	fanout := func() {
		for i := 0; i < r.cfg.Workers; i++ {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	// Work loops get a context that outlives ctx by the time a batch needs
	// to finish: a cancelled relay still marks what it sent.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	go func() {
		<-ctx.Done()
		// Give the batches in flight their send timeout, then stop them.
		t := time.NewTimer(r.cfg.SendTimeout + 5*time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-workCtx.Done():
		}
	}()

	// The liveness session outlives ctx like the batches: it is released
	// once the last batch is marked.
	var liveDone sync.WaitGroup
	liveDone.Add(1)
	go func() { defer liveDone.Done(); r.live.run(workCtx) }()
	defer liveDone.Wait()

	wg.Add(1)
	go func() { defer wg.Done(); r.wakeLoop(ctx, fanout) }()
	if !r.cfg.DisableListen {
		wg.Add(2)
		go func() { defer wg.Done(); r.listenLoop(ctx, fanout) }()
		go func() { defer wg.Done(); r.notifyLoop(ctx) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); r.cleanupLoop(ctx) }()
	go func() { defer wg.Done(); r.statsLoop(ctx) }()

	var workers sync.WaitGroup
	var busy atomic.Int32 // workers with a batch in flight
	for i := 0; i < r.cfg.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.workLoop(ctx, workCtx, wake, fanout, &busy)
		}()
	}
	workers.Wait()
	cancelWork()
	wg.Wait()
	return nil
}

// workLoop claims and publishes batches while there is work, and otherwise
// waits for a wake-up or the poll interval. A worker that finished a batch
// wakes the others: the keys it held are free, and their later events may
// have been skipped meanwhile. A poll that comes while another worker of this
// relay has a batch in flight is skipped for that reason too: that worker's
// wake-up follows, and a claim now would mostly scan events of the keys it
// holds (and hold up the claims of every relay while it does).
func (r *Relay) workLoop(ctx, workCtx context.Context, wake <-chan struct{}, fanout func(), busy *atomic.Int32) {
	poll := time.NewTimer(r.cfg.PollInterval)
	defer poll.Stop()
	select { // claims wait for the liveness session
	case <-ctx.Done():
		return
	case <-r.live.up:
	}
	for ctx.Err() == nil {
		busy.Add(1)
		n, err := r.PublishBatch(workCtx)
		busy.Add(-1)
		if err != nil && workCtx.Err() == nil {
			r.log.WarnContext(ctx, "outbox relay batch failed", "relay", r.cfg.Name, "err", err)
		}
		if n > 0 && r.cfg.Workers > 1 {
			fanout()
		}
		if err == nil && n == r.cfg.BatchSize {
			continue // a full batch: more is probably waiting
		}
	wait:
		for {
			if !poll.Stop() {
				select {
				case <-poll.C:
				default:
				}
			}
			poll.Reset(r.jitter(r.cfg.PollInterval))
			select {
			case <-ctx.Done():
			case <-wake:
			case <-poll.C:
				if busy.Load() > 0 {
					continue wait
				}
			}
			break
		}
	}
}

func (r *Relay) jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func (r *Relay) wakeLoop(ctx context.Context, fanout func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ob.local:
			fanout()
		}
	}
}

// notifyLoop sends one NOTIFY for each burst of local commits, after the
// commit and outside the business transaction: a NOTIFY inside it would take
// a database-wide lock at commit and serialise every commit.
func (r *Relay) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ob.notify:
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := r.ob.db.Exec(nctx, "SELECT pg_notify($1, '')", r.ob.channel)
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.DebugContext(ctx, "outbox notify failed", "err", err)
			}
		}
	}
}

// listenLoop wakes the workers on NOTIFY from other processes. A lost
// connection is re-established; meanwhile polling covers.
func (r *Relay) listenLoop(ctx context.Context, fanout func()) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, fanout)
		if ctx.Err() != nil {
			return
		}
		r.log.DebugContext(ctx, "outbox listen connection lost", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.jitter(2 * time.Second)):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, fanout func()) error {
	// A connection of its own, outside the pool: a listener holds its
	// connection for as long as it runs.
	conn, err := pgx.ConnectConfig(ctx, r.ob.db.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx) //nolint:errcheck // closing a listener; nothing to do on error
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.ob.channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		fanout()
	}
}

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
// The claim also turns bitmap scans off for its own transaction: the outbox
// is a queue, its statistics always lag behind it, and with a few hundred
// rows estimated where tens of thousands wait, the planner read every ready
// row through a bitmap and sorted them rather than walk the seq index until
// the batch is full, and matched the leased ids by ANDing bitmaps of
// thousands of rows (auto_explain of a claim of 1,000: 66 ms, 40 ms without
// bitmaps).
const claimLockSQL = `SELECT pg_advisory_xact_lock(hashtext('outbox_event'), hashtext('claim')), set_config('enable_bitmapscan', 'off', true)`

// The claim statement leases and returns the events to send; their order is
// not the statement's, the caller sorts them by seq.
//
// Ready events are pending and due, or leased by a relay whose lease ended:
// its time ran out (a stuck relay), or its owner holds no liveness lock any
// more (a dead relay, see liveness.go; the set "live" is read once). An event
// may be sent only when every older unpublished event of its key is sent with
// it: $1 events are taken in seq order, skipping those whose key is held back
// by an older event that waits for a retry (retry_wait), is DEAD (until an
// operator requeues or discards it), or is validly leased to a relay
// (leased). Every older event of a taken event's key is then ready and not
// held either, so it precedes it in the scan and is taken too. The checks are
// correlated subqueries probing the small per-key partial indexes (OFFSET 0
// keeps them subqueries, one per index: an OR would need a bitmap, and the
// claim turns bitmaps off): as joins, the planner estimated the held rows
// from statistics that lag behind a leasing relay and compared every
// candidate with every held row. The window of $2 rows bounds the scan when
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
// The UPDATE repeats the readiness test: a row changed by a concurrent
// writer since the snapshot (the relay whose lease expired, marking it now)
// is re-read and dropped. The claim then returns how many rows it meant to
// take, and the caller releases the batch when some were dropped, since a
// dropped row's later events of its key must not go without it.
const claimSQL = `
WITH live AS MATERIALIZED (` + liveOwnersSQL + `
), cand AS MATERIALIZED (
    SELECT r.id, r.seq, r.topic, r.key, r.isolate
      FROM (SELECT e.id, e.seq, e.topic, e.key, e.isolate
              FROM outbox_event e
             WHERE e.status IN ('PENDING', 'PROCESSING')
               AND ((e.status = 'PENDING' AND e.next_attempt_at <= statement_timestamp())
                 OR (e.status = 'PROCESSING' AND (e.locked_until <= statement_timestamp()
                      OR e.lease_owner::oid NOT IN (SELECT objid FROM live))))
               AND NOT EXISTS (
                   SELECT FROM outbox_event w
                    WHERE w.topic = e.topic AND w.key = e.key AND w.seq < e.seq
                      AND w.status = 'PENDING' AND w.attempts > 0
                      AND w.next_attempt_at > statement_timestamp()
                   OFFSET 0)
               AND NOT EXISTS (
                   SELECT FROM outbox_event d
                    WHERE d.topic = e.topic AND d.key = e.key AND d.seq < e.seq
                      AND d.status = 'DEAD'
                   OFFSET 0)
             ORDER BY e.seq
             LIMIT $2) r
     WHERE NOT EXISTS (
           SELECT FROM outbox_event l
            WHERE l.topic = r.topic AND l.key = r.key AND l.seq < r.seq
              AND l.status = 'PROCESSING' AND l.locked_until > statement_timestamp()
              AND (l.lease_owner IS NULL OR l.lease_owner::oid IN (SELECT objid FROM live))
           OFFSET 0)
     ORDER BY r.seq
     LIMIT $1
), kept AS (
    SELECT id FROM (
        SELECT id, bool_or(isolate) OVER (PARTITION BY topic, key ORDER BY seq
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS behind_isolated
          FROM cand) c
     WHERE behind_isolated IS NOT TRUE
       AND ($5::int IS NULL OR $5::int::oid IN (SELECT objid FROM live))
), leased AS (
    UPDATE outbox_event e
       SET status = 'PROCESSING', locked_by = $3, lease_owner = $5::int,
           locked_until = statement_timestamp() + $4::interval
      FROM kept k
     WHERE e.id = k.id
       AND ((e.status = 'PENDING' AND e.next_attempt_at <= statement_timestamp())
         OR (e.status = 'PROCESSING' AND (e.locked_until <= statement_timestamp()
              OR e.lease_owner::oid NOT IN (SELECT objid FROM live))))
    RETURNING e.id, e.seq, e.topic, e.key, e.event_type, e.payload, e.headers, e.attempts, e.refusals, e.isolate, e.enqueued_at
)
SELECT l.*, (SELECT count(*) FROM kept) FROM leased l`

// releaseSQL gives back leases a claim took but did not send.
const releaseSQL = `
UPDATE outbox_event AS o
   SET status = 'PENDING', locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[]) AS r(id)
 WHERE o.id = r.id AND o.status = 'PROCESSING' AND o.locked_by = $2`

// publishedSQL, failedSQL and releaseSQL join the ids as a table: an index
// probe per id, where "id = ANY(array)" was planned as an AND of bitmaps
// over every unpublished and every leased row. Each only touches rows the
// claim ($2, $5) still leases: another claim's rows, even of the same relay,
// are never touched.
const publishedSQL = `
UPDATE outbox_event AS o
   SET status = 'PUBLISHED', published_at = now(), locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[]) AS p(id)
 WHERE o.id = p.id AND o.status = 'PROCESSING' AND o.locked_by = $2`

// failedSQL records failed sends: every failure adds to attempts (which
// paces the backoff); only the broker's refusals of the record add to
// refusals, and only refusals turn an event DEAD.
const failedSQL = `
UPDATE outbox_event AS o
   SET status = CASE WHEN f.dead THEN 'DEAD' ELSE 'PENDING' END,
       attempts = o.attempts + 1,
       refusals = o.refusals + CASE WHEN f.refused THEN 1 ELSE 0 END,
       next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
       last_error = f.err,
       isolate = o.isolate OR f.refused,
       locked_by = NULL, locked_until = NULL, lease_owner = NULL
  FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::bool[], $6::bool[]) AS f(id, delay_ms, err, dead, refused)
 WHERE o.id = f.id AND o.status = 'PROCESSING' AND o.locked_by = $5`

// errNotSent is the result of an event the claim leased but did not send:
// held back behind an older event of its key that failed in the same batch,
// or left when the batch ran out of lease. It goes back to the queue as it
// was: not an attempt.
var errNotSent = errors.New("not sent")

// lease is one claim's hold on its rows.
type lease struct {
	// token is the claim's locked_by.
	token string
	// sendBy is when sending must stop: LeaseMargin before the lease ends,
	// measured from before the claim was sent (the database starts the
	// lease later than that).
	sendBy time.Time
}

// PublishBatch claims one batch, publishes it and records the outcome. It
// returns how many events it claimed. Exported for tests and benchmarks;
// Run calls it in a loop. Called outside Run, its leases carry no liveness
// key and end only with time.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	if _, live := r.live.owner(); r.running.Load() && !live {
		return 0, nil // no liveness session (lost, or not yet back): claim nothing
	}
	start := time.Now()
	batch, l, err := r.claim(ctx)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	results := r.send(ctx, batch, l.sendBy)
	err = r.record(ctx, batch, results, l.token)
	r.metrics.BatchSize.Observe(float64(len(batch)))
	r.metrics.BatchDuration.Observe(time.Since(start).Seconds())
	return len(batch), err
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
	if _, err := r.ob.db.Exec(ctx, releaseSQL, ids, token); err != nil {
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
		var c claimed
		var headers []byte
		if err := rows.Scan(&c.id, &c.seq, &c.topic, &c.key, &c.eventType, &c.payload, &headers, &c.attempts, &c.refusals,
			&c.isolate, &c.enqueuedAt, &kept); err != nil {
			return nil, false, fmt.Errorf("scan outbox event: %w", err)
		}
		if err := json.Unmarshal(headers, &c.headers); err != nil {
			c.headers = nil // a broken header map must not block the event
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

// send publishes the batch and returns one error per event (nil: acked;
// errNotSent: not tried). Events go in one call, in seq order, so that the
// events of a key form one record batch of one partition and succeed or fail
// together. Events the broker refused before go afterwards, one call each,
// one after the other: the writer merges concurrent calls into one batch,
// and a poison event must not fail its neighbours again. An isolated event
// whose key's older event failed in the first call is not sent: it would
// overtake it.
//
// No call runs past sendBy: the lease is the relay's only while it lasts, and
// a send after it could race the relay that takes the events over. What is
// left at sendBy is not sent.
func (r *Relay) send(ctx context.Context, batch []claimed, sendBy time.Time) []error {
	results := make([]error, len(batch))
	var together []int
	var alone []int
	for i, c := range batch {
		if c.isolate {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	call := func(idx []int) {
		deadline := time.Now().Add(r.cfg.SendTimeout)
		if sendBy.Before(deadline) {
			deadline = sendBy
		}
		if time.Until(deadline) <= 0 {
			for _, i := range idx {
				results[i] = errNotSent
			}
			return
		}
		msgs := make([]kafka.Message, len(idx))
		spans := make([]trace.Span, len(idx))
		for j, i := range idx {
			msgs[j], spans[j] = publishSpan(ctx, batch[i])
		}
		defer func() {
			for j, i := range idx {
				if results[i] != nil {
					spans[j].SetStatus(codes.Error, results[i].Error())
				}
				spans[j].End()
			}
		}()
		sctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		err := r.pub.WriteMessages(sctx, msgs...)
		var werrs kafka.WriteErrors
		switch {
		case err == nil:
		case errors.As(err, &werrs) && len(werrs) == len(idx):
			for j, i := range idx {
				results[i] = werrs[j]
			}
		default:
			for _, i := range idx {
				results[i] = err
			}
		}
	}
	if len(together) > 0 {
		call(together)
	}
	for _, i := range alone {
		if olderFailed(batch, results, i) {
			results[i] = errNotSent
			continue
		}
		call([]int{i})
	}
	return results
}

// olderFailed reports whether an event of batch[i]'s key older than it
// (earlier in the seq-sorted batch) was not acked.
func olderFailed(batch []claimed, results []error, i int) bool {
	for j := range i {
		if results[j] != nil && batch[j].topic == batch[i].topic && batch[j].key == batch[i].key {
			return true
		}
	}
	return false
}

// publishSpan starts the producer span of one event, a child of the trace
// the event was enqueued in, and returns the record carrying that span's
// traceparent.
func publishSpan(ctx context.Context, c claimed) (kafka.Message, trace.Span) {
	parent := tracing.WithTraceparent(context.WithoutCancel(ctx), c.headers[events.HeaderTraceparent])
	sctx, span := tracing.Tracer().Start(parent, "outbox publish "+c.topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", c.topic),
			attribute.String("messaging.message.id", c.id.String())))
	m := toKafka(c)
	if tp := tracing.Traceparent(sctx); tp != "" {
		m.Headers = broker.SetHeader(m.Headers, events.HeaderTraceparent, tp)
	}
	return m, span
}

func toKafka(c claimed) kafka.Message {
	hs := make([]kafka.Header, 0, 2+len(c.headers))
	hs = append(hs,
		kafka.Header{Key: events.HeaderEventID, Value: []byte(c.id.String())},
		kafka.Header{Key: events.HeaderEventType, Value: []byte(c.eventType)},
	)
	names := make([]string, 0, len(c.headers))
	for k := range c.headers {
		if k != events.HeaderEventID && k != events.HeaderEventType {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		hs = append(hs, kafka.Header{Key: k, Value: []byte(c.headers[k])})
	}
	return kafka.Message{Topic: c.topic, Key: []byte(c.key), Value: c.payload, Headers: hs}
}

// record marks acked events PUBLISHED, gives back the unsent ones and
// schedules the failed ones. The updates only touch rows this claim still
// leases: if the lease ended and another relay took the event over, that
// relay records the outcome.
func (r *Relay) record(ctx context.Context, batch []claimed, results []error, token string) error {
	var ok []uuid.UUID
	var unsent []claimed
	var failIDs []uuid.UUID
	var delays []int64
	var errs []string
	var dead, refused []bool
	var firstErr error
	var firstID uuid.UUID
	var firstAttempts int
	now := time.Now()
	for i, c := range batch {
		err := results[i]
		switch {
		case err == nil:
			ok = append(ok, c.id)
			r.metrics.Published.WithLabelValues(c.topic, c.eventType).Inc()
			r.metrics.EnqueueToAck.Observe(now.Sub(c.enqueuedAt).Seconds())
			continue
		case errors.Is(err, errNotSent):
			unsent = append(unsent, c)
			continue
		}
		ref := Refused(err)
		attempts := c.attempts + 1
		isDead := ref && c.refusals+1 >= r.cfg.MaxAttempts
		failIDs = append(failIDs, c.id)
		delays = append(delays, r.backoff(attempts).Milliseconds())
		errs = append(errs, truncate(err.Error(), 2000))
		dead = append(dead, isDead)
		refused = append(refused, ref)
		r.metrics.SendFailures.WithLabelValues(Cause(err)).Inc()
		if isDead {
			r.metrics.DeadTotal.Inc()
			r.log.ErrorContext(ctx, "outbox event is DEAD: the broker refused it for good; its key is held back until an operator requeues or discards it",
				"evento_id", c.id, "topic", c.topic, "evento_tipo", c.eventType, "refusals", c.refusals+1, "err", err)
		} else if firstErr == nil {
			firstErr, firstID, firstAttempts = err, c.id, attempts
		}
	}
	if firstErr != nil {
		// One line per batch: an outage fails every event of every batch.
		r.log.WarnContext(ctx, "outbox sends failed, will retry", "failed", len(failIDs), "of", len(batch),
			"cause", Cause(firstErr), "first_evento_id", firstID, "attempts", firstAttempts, "err", firstErr)
	}
	// Fresh context: the marks must land even if the send used up ctx.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if len(ok) > 0 {
		if _, err := r.ob.db.Exec(mctx, publishedSQL, ok, token); err != nil {
			// The events stay PROCESSING; after the lease they are sent
			// again: a duplicate, never a loss.
			return fmt.Errorf("mark %d outbox events published: %w", len(ok), err)
		}
	}
	if len(failIDs) > 0 {
		if _, err := r.ob.db.Exec(mctx, failedSQL, failIDs, delays, errs, dead, token, refused); err != nil {
			return fmt.Errorf("schedule %d outbox retries: %w", len(failIDs), err)
		}
	}
	return r.release(mctx, unsent, token)
}

// backoff is the delay before attempt+1: exponential from BackoffBase,
// capped at BackoffMax, with equal jitter.
func (r *Relay) backoff(attempts int) time.Duration {
	return backoff.Exponential{Initial: r.cfg.BackoffBase, Multiplier: 2, Max: r.cfg.BackoffMax, Jitter: true}.Delay(attempts)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
