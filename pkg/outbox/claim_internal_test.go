package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// The claim asks the lock manager whether a lease's owner is alive
// (ownerDeadSQL): a relay whose own liveness lock is not held leases
// nothing; a row leased by a live owner stays with it; once that owner's
// session is gone, the row is taken over at once, before its lease ends.
func TestClaimAsksTheLockManagerWhoIsAlive(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t, migrations.Platform)
	db := openPlatformDB(t, dsn, 5)
	ob := New(db)
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx, events.Message{AggregateType: "t", AggregateID: "1", Topic: "t", Key: "k", Type: "T", Payload: []byte(`{}`)})
	}); err != nil {
		t.Fatal(err)
	}
	r := NewRelay(ob, nil, RelayConfig{Name: "r"}, slog.New(slog.DiscardHandler), nil)

	// The relay believes it holds key 4242, but no session does: its
	// session just dropped. It leases nothing.
	const mine, other = 4242, 4343
	r.live.key.Store(mine)
	batch, _, err := r.claimOnce(ctx, "r/1")
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 0 {
		t.Fatalf("a relay without its liveness lock leased %d events", len(batch))
	}

	// Another relay, alive (its session holds its key), leases the event
	// for a long time.
	session, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Exec(ctx, livenessLockSQL, other); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE outbox_event SET status = 'PROCESSING', locked_by = 'other/1', lease_owner = $1,
		locked_until = now() + interval '1 hour'`, other); err != nil {
		t.Fatal(err)
	}
	// Now this relay's own session holds its key too.
	own, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close(ctx) })
	if _, err := own.Exec(ctx, livenessLockSQL, mine); err != nil {
		t.Fatal(err)
	}
	if batch, _, err = r.claimOnce(ctx, "r/2"); err != nil {
		t.Fatal(err)
	}
	if len(batch) != 0 {
		t.Fatalf("took %d events leased by a live relay", len(batch))
	}

	// The other relay dies: its session goes, and with it its lock (the
	// server ends the backend a moment after the connection closes).
	if err := session.Close(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the dead relay's lease taken over", func() (bool, string) {
		batch, _, err := r.claimOnce(ctx, "r/3")
		if err != nil {
			t.Fatal(err)
		}
		return len(batch) == 1, fmt.Sprintf("took %d events", len(batch))
	})
	var owner int32
	var by string
	if err := db.QueryRow(ctx, `SELECT lease_owner, locked_by FROM outbox_event`).Scan(&owner, &by); err != nil {
		t.Fatal(err)
	}
	if owner != mine || by != "r/3" {
		t.Errorf("lease is %s owned by %d, want r/3 owned by %d", by, owner, mine)
	}
}

// The outbox table is vacuumed and analyzed after a fixed number of dead
// tuples, without cost delay, whatever its size (migration 00003): a queue
// whose dead index entries pile up between vacuums slows every claim.
func TestOutboxVacuumedByCountNotShare(t *testing.T) {
	ctx := context.Background()
	db := openPlatformDB(t, pgtest.NewDSN(t, migrations.Platform), 2)
	var opts []string
	if err := db.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = 'outbox_event'`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=5000",
		"autovacuum_analyze_scale_factor=0", "autovacuum_vacuum_cost_delay=0"} {
		if !slices.Contains(opts, want) {
			t.Errorf("outbox_event's storage options %v lack %s", opts, want)
		}
	}
}

// A claim reads each held set (retry_wait, DEAD, leased) once, whatever the
// statistics say: with statistics of an almost empty queue, per-candidate
// checks would be served from the seq-only unpublished index, every older
// row for every candidate. The plan is checked, not the time: no scan of
// outbox_event but the UPDATE's primary key lookup may run once per
// candidate.
func TestClaimReadsHeldRowsOncePerClaim(t *testing.T) {
	ctx := context.Background()
	db := openPlatformDB(t, pgtest.NewDSN(t, migrations.Platform), 2)
	insert := func(n int, status string) {
		t.Helper()
		if _, err := db.Exec(ctx, `INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type,
			payload, occurred_at, status, published_at)
			SELECT gen_random_uuid(), 't', i::text, 't', 'k' || i, 'T', '{}', now(), $2,
			       CASE WHEN $2 = 'PUBLISHED' THEN now() END
			  FROM generate_series(1, $1) i`, n, status); err != nil {
			t.Fatal(err)
		}
	}
	// The statistics see published rows only, then a backlog arrives with
	// keys waiting for a retry among it.
	insert(20000, "PUBLISHED")
	if _, err := db.Exec(ctx, `ANALYZE outbox_event`); err != nil {
		t.Fatal(err)
	}
	insert(2000, "PENDING")
	if _, err := db.Exec(ctx, `UPDATE outbox_event SET attempts = 1, next_attempt_at = now() + interval '1 hour'
		WHERE status = 'PENDING' AND aggregate_id::int % 10 = 0`); err != nil {
		t.Fatal(err)
	}

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, claimLockSQL); err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+claimSQL,
		1000, 2000, "r/1", "30s", nil).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var scans, leased int
	plan[0].Plan.walk(func(n planNode) {
		if n.Relation != "outbox_event" {
			return
		}
		scans++
		if n.NodeType == "ModifyTable" {
			leased = n.ActualRows
		}
		if n.Loops > 1 && n.Index != "outbox_event_pkey" {
			t.Errorf("%s on %s ran %d times in one claim, want once", n.NodeType, n.Index, n.Loops)
		}
	})
	if scans < 4 {
		t.Fatalf("plan lists %d reads of outbox_event, want the held sets, the candidates and the update", scans)
	}
	if leased != 1000 {
		t.Errorf("the claim leased %d events, want 1000", leased)
	}
}

// planNode is the part of EXPLAIN's JSON the test reads.
type planNode struct {
	NodeType   string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Index      string     `json:"Index Name"`
	Loops      int        `json:"Actual Loops"`
	ActualRows int        `json:"Actual Rows"`
	Plans      []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// Only outages of the path to the broker make an event wait for the broker:
// causes that name the record or an operator's fix keep their backoff, even
// where kafka-go calls them temporary.
func TestWaitsForBroker(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{io.ErrUnexpectedEOF, true},
		{broker.RecordError(kerr.LeaderNotAvailable), true},
		{broker.RecordError(kerr.NotEnoughReplicas), true},
		{broker.RecordError(kerr.RequestTimedOut), true},
		{broker.RecordError(kerr.CorruptMessage), false},
		{broker.RecordError(kerr.MessageTooLarge), false},
		{broker.RecordError(kerr.UnknownTopicOrPartition), false},
		{broker.RecordError(kerr.TopicAuthorizationFailed), false},
		{errors.New("something else"), false},
	} {
		if got := waitsForBroker(tt.err); got != tt.want {
			t.Errorf("waitsForBroker(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A failure counted while a probe or resume runs keeps the relay waiting:
// the statement resolves only the failures counted before it began. And a
// resume runs at most once per interval.
func TestWaitStateKeepsAFailureCountedDuringAProbe(t *testing.T) {
	var w waitState
	if w.waiting() {
		t.Fatal("a new state is waiting")
	}
	w.failed()
	seen := w.begin() // a probe starts
	w.failed()        // a batch fails while it runs
	w.settle(seen)    // the probe found nothing waiting
	if !w.waiting() {
		t.Error("the failure counted during the probe was lost")
	}
	w.settle(w.begin())
	if w.waiting() {
		t.Error("still waiting after every failure was resolved")
	}
	w.settle(seen) // a late, older settle changes nothing
	if w.waiting() {
		t.Error("an older settle made the state wait again")
	}

	now := time.Now()
	if !w.resumeDue(now, time.Second) {
		t.Error("the first resume is not due")
	}
	if w.resumeDue(now.Add(500*time.Millisecond), time.Second) {
		t.Error("a second resume within the interval is due")
	}
	if !w.resumeDue(now.Add(time.Second), time.Second) {
		t.Error("a resume one interval later is not due")
	}
}

// openPlatformDB opens a pool of conns connections on dsn, closed when the
// test ends.
func openPlatformDB(t *testing.T, dsn string, conns int32) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}
