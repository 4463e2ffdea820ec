package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/poll"
)

// sentPublisher reports the event id of every record it is given.
type sentPublisher struct{ sent chan string }

func (p sentPublisher) Publish(_ context.Context, msgs ...broker.Record) error {
	for _, m := range msgs {
		p.sent <- header(m, events.HeaderEventID)
	}
	return nil
}

// A commit that waits for its synchronous standby is already in the WAL,
// and so in the stream, but not yet visible to other sessions nor
// acknowledged to its client: were its event sent then, a consumer could
// act on a transfer it cannot read, and a failover could lose a transfer
// whose event was out. The relay sends it only once it is visible. The
// server here names a synchronous standby that never connects, as a
// primary sees a stopped one.
func TestLogicalRelaySendsOnlyVisibleCommits(t *testing.T) {
	t.Parallel()
	pg := cluster.StartPG(t, "pg-visible", "-c", "wal_level=logical", "-c", "max_replication_slots=4", "-c", "max_wal_senders=4")
	pg.CreateDB("app")
	ctx := context.Background()
	db := openPlatformDB(ctx, t, pg.DSN("app", ""), pg.DSN("app", "visibility-test"))
	ob := outbox.New(db)
	enqueue := func(id uuid.UUID) error {
		body, _ := json.Marshal(payload{Key: "k"})
		return db.InTx(ctx, func(tx pgx.Tx) error {
			return ob.Enqueue(ctx, tx, events.Message{ID: id, AggregateType: "widget", AggregateID: id.String(),
				Topic: "t", Key: "k", Type: "WidgetCreated", Payload: body})
		})
	}
	// names is a constant of the test (ALTER SYSTEM takes no parameters).
	setStandby := func(names string) {
		t.Helper()
		if _, err := db.Exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = '%s'`, names)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
		poll.True(t, 10*time.Second, "synchronous_standby_names = '"+names+"'", func() bool {
			var got string
			return db.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&got) == nil && got == names
		})
	}

	pub := sentPublisher{sent: make(chan string, 16)}
	dropSlotOf(t, db)
	r := outbox.NewLogicalRelay(ob, pub, logicalConfig(), fastRelay("logical"), testLogger(t), nil, nil)
	background.Go(t, "logical relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", r.Active)
	first := uuid.New()
	if err := enqueue(first); err != nil {
		t.Fatal(err)
	}
	waitSent(t, pub, first)

	setStandby("ghost")
	// Runs before db.Close, which would wait for the held commit forever
	// were the test to fail with the standby still named.
	t.Cleanup(func() {
		_, _ = db.Exec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`)
		_, _ = db.Exec(ctx, `SELECT pg_reload_conf()`)
	})
	committed := make(chan error, 1)
	waiting := uuid.New()
	go func() { committed <- enqueue(waiting) }()
	poll.True(t, 10*time.Second, "the commit waits for the standby", func() bool {
		var n int
		return db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n) == nil && n == 1
	})
	select {
	case id := <-pub.sent:
		t.Fatalf("event %s sent while its commit waited for the standby, invisible and unacknowledged", id)
	case err := <-committed:
		t.Fatalf("the commit returned (%v) with its synchronous standby away", err)
	case <-time.After(2 * time.Second):
	}

	setStandby("")
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the commit still waits with no synchronous standby named")
	}
	waitSent(t, pub, waiting)
}

func waitSent(t *testing.T, pub sentPublisher, id uuid.UUID) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case got := <-pub.sent:
			if got == id.String() {
				return
			}
		case <-deadline:
			t.Fatalf("event %s not sent", id)
		}
	}
}

// openPlatformDB applies the platform migrations through adminDSN and opens
// a pool on dsn, closed when the test ends.
func openPlatformDB(ctx context.Context, t *testing.T, adminDSN, dsn string) *postgres.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDB(*cfg)
	err = migrations.Apply(ctx, sqlDB, migrations.Platform)
	_ = sqlDB.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}
