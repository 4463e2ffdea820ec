package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/pgtest"
)

// TestApplyResultsOnce: 20 concurrent deliveries of one result apply it
// once (one moves the transfer, 19 are duplicates, one inbox row), and an
// event repeated within a batch, for a transfer held or known, counts
// once too; every duplicate counts in inbox_duplicates_total, which
// exists at zero from the start.
func TestApplyResultsOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pg.Wrap(pgtest.NewPool(t, migrations.ForService("transfers")...))
	reg := prometheus.NewRegistry()
	store := postgres.NewStore(db, outbox.New(db), "test", reg, 0)
	dups := func() float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "inbox_duplicates_total" && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no series inbox_duplicates_total")
		return 0
	}
	if got := dups(); got != 0 {
		t.Fatalf("inbox_duplicates_total at start = %v, want 0", got)
	}
	id := uuid.New()
	svc := transfer.NewService(store, "requested", authtest.NewTransferKey(t))
	if _, _, err := svc.Submit(ctx, transfer.Submission{ID: id, Client: "loja",
		Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL"},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	r := transfer.Result{EventID: uuid.New(), TransferID: id, Status: transfer.StatusSettled}
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[transfer.Outcome]int{}
	for range 20 {
		wg.Go(func() {
			out, _, err := store.ApplyResults(ctx, []transfer.Result{r})
			if err != nil {
				t.Errorf("ApplyResults: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			outcomes[out[0]]++
		})
	}
	wg.Wait()
	if diff := cmp.Diff(map[transfer.Outcome]int{transfer.Moved: 1, transfer.Unchanged: 19}, outcomes); diff != "" {
		t.Errorf("outcomes of 20 deliveries (-want +got):\n%s", diff)
	}
	lost := transfer.Result{EventID: uuid.New(), TransferID: uuid.New(), Status: transfer.StatusSettled}
	out, _, err := store.ApplyResults(ctx, []transfer.Result{lost, r, lost})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]transfer.Outcome{transfer.Held, transfer.Unchanged, transfer.Unchanged}, out); diff != "" {
		t.Errorf("outcomes of a batch repeating an event (-want +got):\n%s", diff)
	}
	var marks, held int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_event WHERE consumer = 'test'),
    (SELECT count(*) FROM resultado_retido)`).Scan(&marks, &held); err != nil {
		t.Fatal(err)
	}
	if marks != 2 || held != 1 {
		t.Errorf("%d inbox rows and %d held rows, want 2 and 1", marks, held)
	}
	if got := dups(); got != 21 {
		t.Errorf("inbox_duplicates_total = %v, want 21 (19 concurrent, 2 in the batch)", got)
	}
}

// CleanupInbox deletes processed-event rows older than the retention, of
// every consumer, in batches; newer rows stay, so their redeliveries are
// still duplicates.
func TestCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pg.Wrap(pgtest.NewPool(t, migrations.ForService("transfers")...))
	store := postgres.NewStore(db, nil, "test", nil, 0)
	if _, err := db.Exec(ctx, `
		INSERT INTO inbox_event (consumer, event_id, processed_at)
		SELECT c, gen_random_uuid(), now() - (d || ' days')::interval
		  FROM unnest(ARRAY['a', 'b']) c, unnest(ARRAY[1, 13, 15, 20, 30]) d`); err != nil {
		t.Fatal(err)
	}
	n, err := store.CleanupInbox(ctx, 14*24*time.Hour, 2) // INBOX_RETENTION's default
	if err != nil || n != 6 {
		t.Fatalf("Cleanup = %d, %v; want 6", n, err)
	}
	var left []string
	rows, err := db.Query(ctx, `SELECT consumer || ':' || round(EXTRACT(EPOCH FROM now() - processed_at) / 86400) FROM inbox_event ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a:1", "a:13", "b:1", "b:13"}, left); diff != "" {
		t.Errorf("rows left (-want +got):\n%s", diff)
	}
}
