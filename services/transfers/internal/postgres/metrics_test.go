package postgres_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/pgtest"
)

// TestHeldResultsCounted: a result for an unknown transfer counts once in
// transfers_results_held_total, however often it is redelivered, one by
// one or in a batch, and the gauge reads the unresolved held rows; a
// result for a known transfer counts nothing. Both series exist at zero
// from the start, for the alert.
func TestHeldResultsCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pg.Wrap(pgtest.NewPool(t, migrations.ForService("transfers")...))
	reg := prometheus.NewRegistry()
	store := postgres.NewStore(db, outbox.New(db), "transferencias-projecao", reg, 0)
	value := func(name string) float64 {
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
	if a, b, c := value("transfers_results_held_total"), value("transfers_results_held"), value("transfers_results_held_overdue"); a != 0 || b != 0 || c != 0 {
		t.Fatalf("series at start = %v, %v, %v; want 0, 0, 0", a, b, c)
	}
	svc := transfer.NewService(store, "requested", authtest.NewTransferKey(t))
	known := uuid.New()
	if _, _, err := svc.Submit(ctx, transfer.Submission{ID: known, Client: "loja",
		Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL"},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
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
