package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/pgtest"
	"github.com/paysuite/payments/test/poll"
)

// The claim asks the lock manager whether a lease's owner is alive
// (ownerDeadSQL): a relay whose own liveness lock is not held leases
// nothing; a row leased by a live owner stays with it; once that owner's
// session is gone, the row is taken over at once, before its lease ends.
func TestClaimAsksTheLockManagerWhoIsAlive(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t, migrations.Platform)
	db, err := postgres.Open(ctx, dsn, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ob := New(db)
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx, Message{AggregateType: "t", AggregateID: "1", Topic: "t", Key: "k", Type: "T", Payload: []byte(`{}`)})
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
	db, err := postgres.Open(ctx, pgtest.NewDSN(t, migrations.Platform), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
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
