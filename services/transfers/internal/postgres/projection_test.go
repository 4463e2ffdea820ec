package postgres_test

import (
	"context"
	"github.com/paysuite/payments/pkg/events"
	"log/slog"
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
	"github.com/paysuite/payments/test/support/pgtest"
)

// newStore is a Store on a fresh transfers database, recording processed
// events under consumer, its metrics registered on reg (nil: nowhere).
func newStore(t *testing.T, consumer string, reg prometheus.Registerer) (*pg.DB, *postgres.Store) {
	t.Helper()
	db := pg.Wrap(pgtest.NewPool(t, migrations.ForService("transfers")...))
	return db, postgres.NewStore(db, outbox.New(db), consumer, reg, 0)
}

// pending creates a PENDENTE transfer in store and returns its id.
func pending(t *testing.T, store *postgres.Store) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, _, err := transfer.NewService(store, events.Topics{Requested: "requested"}, authtest.NewTransferKey(t)).Submit(t.Context(), transfer.Submission{ID: id, Client: "loja",
		Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL"},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// value is the value of the one series of the counter or gauge name on reg.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			s := f.GetMetric()[0]
			return s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// TestHeldResultsCounted: a result for an unknown transfer counts once in
// transfers_results_held_total, however often it is redelivered, one by
// one or in a batch, and the gauge reads the unresolved held rows; a
// result for a known transfer counts nothing. Both series exist at zero
// from the start, for the alert.
func TestHeldResultsCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	_, store := newStore(t, "transferencias-projecao", reg)
	value := func(name string) float64 { return value(t, reg, name) }
	if a, b, c := value("transfers_results_held_total"), value("transfers_results_held"), value("transfers_results_held_overdue"); a != 0 || b != 0 || c != 0 {
		t.Fatalf("series at start = %v, %v, %v; want 0, 0, 0", a, b, c)
	}
	known := pending(t, store)
	lost := transfer.Result{EventID: uuid.New(), TransferID: uuid.New(), Status: transfer.StatusSettled}
	lost2 := transfer.Result{EventID: uuid.New(), TransferID: uuid.New(), Status: transfer.StatusRejected, Reason: "SALDO_INSUFICIENTE"}
	mine := transfer.Result{EventID: uuid.New(), TransferID: known, Status: transfer.StatusSettled}
	for range 2 {
		if _, _, err := store.ApplyResults(ctx, []transfer.Result{lost}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.ApplyResults(ctx, []transfer.Result{mine, lost2, lost}); err != nil {
			t.Fatal(err)
		}
	}
	if got := value("transfers_results_held_total"); got != 2 {
		t.Errorf("transfers_results_held_total = %v, want 2", got)
	}
	store.RefreshHeldGauges(ctx, time.Hour, slog.New(slog.DiscardHandler))
	if got := value("transfers_results_held"); got != 2 {
		t.Errorf("transfers_results_held = %v, want 2", got)
	}
	if got := value("transfers_results_held_overdue"); got != 0 {
		t.Errorf("transfers_results_held_overdue within the window = %v, want 0", got)
	}
	// Past the window (here: no window at all) they are the operator's.
	store.RefreshHeldGauges(ctx, 0, slog.New(slog.DiscardHandler))
	if got := value("transfers_results_held_overdue"); got != 2 {
		t.Errorf("transfers_results_held_overdue past the window = %v, want 2", got)
	}
	if err := store.DiscardHeld(ctx, lost.EventID, transfer.Resolution{Operator: "ana"}); err != nil {
		t.Fatal(err)
	}
	store.RefreshHeldGauges(ctx, time.Hour, slog.New(slog.DiscardHandler))
	if got := value("transfers_results_held"); got != 1 {
		t.Errorf("transfers_results_held after a discard = %v, want 1", got)
	}
}

// TestApplyResultsOnce: 20 concurrent deliveries of one result apply it
// once (one moves the transfer, 19 are duplicates, one inbox row), and an
// event repeated within a batch, for a transfer held or known, counts
// once too; every duplicate counts in inbox_duplicates_total, which
// exists at zero from the start.
func TestApplyResultsOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	db, store := newStore(t, "test", reg)
	dups := func() float64 { return value(t, reg, "inbox_duplicates_total") }
	if got := dups(); got != 0 {
		t.Fatalf("inbox_duplicates_total at start = %v, want 0", got)
	}
	r := transfer.Result{EventID: uuid.New(), TransferID: pending(t, store), Status: transfer.StatusSettled}
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
	db, store := newStore(t, "test", nil)
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
