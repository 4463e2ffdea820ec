package consume_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// hold creates a hold (captura MANUAL) of 100 cents, PENDENTE.
func (f fixture) hold(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, _, err := f.svc.Submit(context.Background(), transfer.Submission{
		ID:     id,
		Client: "client-a",
		Request: transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL",
			Capture: events.CaptureManual},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// reserved is the ledger's TransferenciaReservada of transfer id.
func reserved(id uuid.UUID) events.Reserved {
	return events.Reserved{EventID: events.DerivedID(events.KindReserved, id), TransferID: id, AmountCents: 100,
		ExpiresAt: time.Now().Add(time.Hour).UTC(), OccurredAt: time.Now().UTC()}
}

// captured is the ledger's TransferenciaLiquidada of a capture of n cents.
func captured(id uuid.UUID, n int64) events.Settled {
	s := settled(id)
	s.AmountCents = n
	return s
}

// cancelled is the ledger's TransferenciaCancelada of transfer id.
func cancelled(id uuid.UUID, reason string) events.Cancelled {
	return events.Cancelled{EventID: events.DerivedID(events.KindCancelled, id), TransferID: id, Reason: reason, OccurredAt: time.Now().UTC()}
}

// recordOf is ev as a record of the topic its type is read from.
func recordOf(t *testing.T, ev any) broker.Record {
	t.Helper()
	switch ev.(type) {
	case events.Settled:
		return record(t, topics.Settled, ev)
	case events.Rejected:
		return record(t, topics.Rejected, ev)
	case events.Reserved:
		return record(t, topics.Reserved, ev)
	case events.Cancelled:
		return record(t, topics.Cancelled, ev)
	}
	t.Fatalf("no topic for %T", ev)
	return broker.Record{}
}

type holdState struct {
	Status  transfer.Status
	Settled int64
}

// TestProjectionHolds applies sequences of a hold's results, one record a
// call as they come from different topics, in either order: status moves
// only forward, the first end of a hold wins, a late RESERVADA changes
// nothing, and a capture records what it settled.
func TestProjectionHolds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		records func(id uuid.UUID) []any
		want    holdState
	}{
		{"reserved", func(id uuid.UUID) []any { return []any{reserved(id)} }, holdState{transfer.StatusReserved, 0}},
		{"reserved twice", func(id uuid.UUID) []any { return []any{reserved(id), reserved(id)} }, holdState{transfer.StatusReserved, 0}},
		{"captured in part", func(id uuid.UUID) []any { return []any{reserved(id), captured(id, 60)} }, holdState{transfer.StatusSettled, 60}},
		{"captured whole", func(id uuid.UUID) []any { return []any{reserved(id), captured(id, 100)} }, holdState{transfer.StatusSettled, 100}},
		{"captured before reserved", func(id uuid.UUID) []any { return []any{captured(id, 60), reserved(id)} }, holdState{transfer.StatusSettled, 60}},
		{"cancelled", func(id uuid.UUID) []any { return []any{reserved(id), cancelled(id, events.ReasonCancelledByClient)} },
			holdState{transfer.StatusCancelled, 0}},
		{"expired", func(id uuid.UUID) []any { return []any{reserved(id), cancelled(id, events.ReasonExpired)} },
			holdState{transfer.StatusExpired, 0}},
		{"expired before reserved", func(id uuid.UUID) []any { return []any{cancelled(id, events.ReasonExpired), reserved(id)} },
			holdState{transfer.StatusExpired, 0}},
		{"captured after cancelled", func(id uuid.UUID) []any {
			return []any{reserved(id), cancelled(id, events.ReasonCancelledByClient), captured(id, 60)}
		}, holdState{transfer.StatusCancelled, 0}},
		{"cancelled after captured", func(id uuid.UUID) []any {
			return []any{reserved(id), captured(id, 60), cancelled(id, events.ReasonExpired)}
		}, holdState{transfer.StatusSettled, 60}},
		{"rejected after reserved", func(id uuid.UUID) []any {
			return []any{reserved(id), rejected(id, events.ReasonInsufficientFunds)}
		}, holdState{transfer.StatusReserved, 0}},
		{"reserved after rejected", func(id uuid.UUID) []any {
			return []any{rejected(id, events.ReasonInsufficientFunds), reserved(id)}
		}, holdState{transfer.StatusRejected, 0}},
		{"a capture over the amount is not recorded", func(id uuid.UUID) []any { return []any{reserved(id), captured(id, 101)} },
			holdState{transfer.StatusSettled, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			id := f.hold(t)
			for i, ev := range tt.records(id) {
				if err := f.proj.Handle(ctx, []broker.Record{recordOf(t, ev)}); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			got, err := f.svc.Get(ctx, id, operator)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, holdState{got.Status, got.SettledCents}); diff != "" {
				t.Errorf("state mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProjectionMovesOnlyForward: for every status a transfer can be in
// and every result, the store moves the transfer exactly when
// transfer.CanMove says so (the SQL and the Go rule are one rule).
func TestProjectionMovesOnlyForward(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	all := []transfer.Status{transfer.StatusPending, transfer.StatusReserved, transfer.StatusSettled, transfer.StatusRejected,
		transfer.StatusCancelled, transfer.StatusExpired}
	for _, from := range all {
		for _, to := range all[1:] {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				id := f.hold(t)
				if _, err := f.db.Exec(ctx, `UPDATE transferencia SET status = $2::text,
					motivo_rejeicao = CASE WHEN $2::text = 'REJEITADA' THEN 'X' END WHERE id = $1`, id, string(from)); err != nil {
					t.Fatal(err)
				}
				r := transfer.Result{EventID: uuid.New(), TransferID: id, Status: to}
				if to == transfer.StatusRejected {
					r.Reason = events.ReasonInsufficientFunds
				}
				out, _, err := f.store.ApplyResults(ctx, []transfer.Result{r})
				if err != nil {
					t.Fatal(err)
				}
				got, err := f.svc.Get(ctx, id, operator)
				if err != nil {
					t.Fatal(err)
				}
				want := from
				if transfer.CanMove(from, to) {
					want = to
				}
				if (out[0] == transfer.Moved) != transfer.CanMove(from, to) || got.Status != want {
					t.Errorf("outcome %v, status %s; want moved=%v, status %s", out[0], got.Status, transfer.CanMove(from, to), want)
				}
			})
		}
	}
}

// TestProjectionHoldPoison: a reservation or a release whose eventoId is
// not derived for its transfer, or a release with an unknown motivo, is a
// poison record and changes nothing.
func TestProjectionHoldPoison(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, other := f.hold(t), f.hold(t)
	foreign := reserved(id)
	foreign.EventID = events.DerivedID(events.KindReserved, other)
	badReason := cancelled(id, "OUTRO")
	forged := cancelled(id, events.ReasonExpired)
	forged.EventID = events.DerivedID(events.KindSettled, id)
	for name, ev := range map[string]any{"foreign reservation id": foreign, "unknown motivo": badReason, "settlement id on a release": forged} {
		if err := f.proj.Handle(ctx, []broker.Record{recordOf(t, ev)}); err == nil || !consumer.IsPermanent(err) {
			t.Errorf("%s: Handle = %v, want a permanent error", name, err)
		}
	}
	got, err := f.svc.Get(ctx, id, operator)
	if err != nil || got.Status != transfer.StatusPending {
		t.Errorf("transfer %s, %v; want PENDENTE", got.Status, err)
	}
}

// TestHoldResultsAreBound: a reservation, a capture and a release apply
// only to the transfer of the request they were decided for; one decided
// for another request is held (with the amount a capture settled), and
// re-applied once its transfer is visible: a capture held while the
// transfer was PENDENTE lands after the reservation, from RESERVADA.
func TestHoldResultsAreBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.hold(t)
	request := f.requestOf(t, id)
	other := uuid.New()
	res := reserved(id)
	res.RequestEventID = other
	capt := captured(id, 40)
	capt.RequestEventID = other
	cancel := cancelled(id, events.ReasonExpired)
	cancel.RequestEventID = other
	for _, ev := range []any{res, capt, cancel} {
		if err := f.proj.Handle(ctx, []broker.Record{recordOf(t, ev)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.svc.Get(ctx, id, operator); err != nil || got.Status != transfer.StatusPending {
		t.Fatalf("transfer %s, %v; want PENDENTE: results for another request are held", got.Status, err)
	}
	if n, err := f.store.CountHeld(ctx); err != nil || n != 3 {
		t.Fatalf("CountHeld = %d, %v; want 3", n, err)
	}
	var amount int64
	if err := f.db.QueryRow(ctx, `SELECT valor_centavos FROM resultado_retido WHERE evento_id = $1`, capt.EventID).Scan(&amount); err != nil || amount != 40 {
		t.Errorf("held capture keeps %d, %v; want 40", amount, err)
	}
	// The held results name the transfer's own request now (as if its
	// commit had become visible after them): the reservation first, then
	// the capture (the oldest end) from RESERVADA; the expiry then finds
	// the transfer past it and stays held.
	if _, err := f.db.Exec(ctx, `UPDATE resultado_retido SET evento_solicitacao_id = $1 WHERE transferencia_id = $2`, request, id); err != nil {
		t.Fatal(err)
	}
	n, created, err := f.store.ReapplyHeld(ctx, time.Hour, 100)
	if err != nil || n != 1 || len(created) != 1 {
		t.Fatalf("first ReapplyHeld = %d, %d, %v; want 1 applied, 1 left PENDENTE", n, len(created), err)
	}
	if got, _ := f.svc.Get(ctx, id, operator); got.Status != transfer.StatusReserved {
		t.Fatalf("after the first pass %s, want RESERVADA", got.Status)
	}
	n, created, err = f.store.ReapplyHeld(ctx, time.Hour, 100)
	if err != nil || n != 1 || len(created) != 0 {
		t.Fatalf("second ReapplyHeld = %d, %d, %v; want 1 applied, none left PENDENTE", n, len(created), err)
	}
	got, err := f.svc.Get(ctx, id, operator)
	if err != nil || got.Status != transfer.StatusSettled || got.SettledCents != 40 {
		t.Fatalf("transfer %s %d, %v; want LIQUIDADA 40", got.Status, got.SettledCents, err)
	}
	if n, _, err := f.store.ReapplyHeld(ctx, time.Hour, 100); err != nil || n != 0 {
		t.Errorf("third ReapplyHeld = %d, %v; want 0 (the expiry is past)", n, err)
	}
	// Bound to the right request, a result applies at once.
	id2 := f.hold(t)
	res2 := reserved(id2)
	res2.RequestEventID = f.requestOf(t, id2)
	if err := f.proj.Handle(ctx, []broker.Record{recordOf(t, res2)}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.svc.Get(ctx, id2, operator); err != nil || got.Status != transfer.StatusReserved {
		t.Errorf("bound reservation: %s, %v; want RESERVADA", got.Status, err)
	}
}

// TestProjectionTellsAdmissionOnce: a hold leaves the flow admission
// control watches when it is reserved; its capture is not counted again.
func TestProjectionTellsAdmissionOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.hold(t)
	out, created, err := f.store.ApplyResults(ctx, []transfer.Result{{EventID: uuid.New(), TransferID: id, Status: transfer.StatusReserved}})
	if err != nil || out[0] != transfer.Moved || len(created) != 1 {
		t.Fatalf("reservation: %v %d %v; want moved, 1 created time", out, len(created), err)
	}
	out, created, err = f.store.ApplyResults(ctx, []transfer.Result{{EventID: uuid.New(), TransferID: id, Status: transfer.StatusSettled, SettledCents: 100}})
	if err != nil || out[0] != transfer.Moved || len(created) != 0 {
		t.Fatalf("capture: %v %d %v; want moved, no created time", out, len(created), err)
	}
}
