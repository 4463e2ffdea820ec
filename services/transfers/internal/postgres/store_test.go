package postgres_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/support/pgtest"
)

// TestCreateIsOneBatch: a transfer's creation is three round trips, BEGIN,
// one batch (the key's claim with the insert, and the event), COMMIT; its
// replay is as many and rolls back the event it queued, so the outbox holds
// one event after both.
func TestCreateIsOneBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDSN(t, migrations.ForService("transfers")...))
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := pg.Wrap(pool)
	svc := transfer.NewService(postgres.NewStore(db, outbox.New(db), "test", nil, 0),
		events.Topics{Requested: "requested"}, authtest.NewTransferKey(t))
	sub := transfer.Submission{ID: uuid.New(), Client: "loja",
		Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL"},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}
	for _, c := range []struct {
		replay bool
		want   []string
	}{
		{false, []string{"begin", "batch", "commit"}},
		{true, []string{"begin", "batch", "rollback"}},
	} {
		trips.reset()
		_, replayed, err := svc.Submit(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if replayed != c.replay {
			t.Fatalf("replayed = %v, want %v", replayed, c.replay)
		}
		if got := trips.get(); !slices.Equal(got, c.want) {
			t.Errorf("round trips of a submission (replay %v) = %v, want %v", c.replay, got, c.want)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE aggregate_id = $1`, sub.ID.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("outbox events of the transfer = %d, want 1", n)
	}
}

// roundTrips records each statement sent alone (its first word) and each
// batch ("batch"); it is a pgx.QueryTracer and a pgx.BatchTracer.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, s)
}

func (r *roundTrips) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = nil
}

func (r *roundTrips) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.trips)
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	word, _, _ := strings.Cut(strings.TrimSpace(data.SQL), " ")
	r.add(strings.ToLower(word))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.add("batch")
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
