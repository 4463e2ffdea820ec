package pgtest_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/test/support/pgtest"
)

func TestNewPoolAppliesMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t, migrations.Platform)

	var version int64
	if err := pool.QueryRow(ctx, "SELECT max(version_id) FROM goose_platform_version").Scan(&version); err != nil {
		t.Fatalf("read goose version: %v", err)
	}
	if version < 1 {
		t.Errorf("platform migrations version = %d, want >= 1", version)
	}
	const insert = `INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at)
		VALUES (gen_random_uuid(), 'transfer', 't-1', 'transfers', 't-1', 'TransferCreated', '{}', now())`
	if _, err := pool.Exec(ctx, insert); err != nil {
		t.Fatalf("insert into migrated outbox_event: %v", err)
	}
}

func TestNewDSNWithoutSetsIsEmpty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pgtest.NewDSN(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()

	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatalf("count tables: %v", err)
	}
	if tables != 0 {
		t.Errorf("database without migration sets has %d tables, want 0", tables)
	}
}

// Each parallel test writes to its own database and sees only its own rows.
func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := pgtest.NewPool(t, migrations.Platform)
			if _, err := pool.Exec(ctx, "INSERT INTO inbox_event (consumer, event_id) VALUES ($1, gen_random_uuid())", fmt.Sprint("c", i)); err != nil {
				t.Fatalf("insert: %v", err)
			}
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM inbox_event").Scan(&n); err != nil {
				t.Fatalf("count: %v", err)
			}
			if n != 1 {
				t.Errorf("inbox_event has %d rows, want 1 (databases shared between tests?)", n)
			}
		})
	}
}

func TestDatabaseDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var name string
	t.Run("user", func(t *testing.T) {
		pool := pgtest.NewPool(t, migrations.Platform)
		if err := pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatalf("current_database: %v", err)
		}
		// An extra connection left open must not stop the drop.
		conn, err := pgx.Connect(t.Context(), pool.Config().ConnString())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		_ = conn // deliberately not closed
	})

	admin, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	if err != nil {
		t.Fatalf("connect to server: %v", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatalf("look up database: %v", err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// BenchmarkNewDSN measures creating one test database from a ready template
// (the databases are dropped when the benchmark ends).
func BenchmarkNewDSN(b *testing.B) {
	pgtest.NewDSN(b, migrations.Platform) // build the template outside the timing
	for b.Loop() {
		pgtest.NewDSN(b, migrations.Platform)
	}
}
