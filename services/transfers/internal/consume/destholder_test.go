package consume_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// paidTo is ev naming holder as the destination's titular.
func paidTo(ev events.Settled, holder string) events.Settled {
	ev.DestHolder = holder
	return ev
}

// TestProjectionStoresTheDestinationHolder: the titularDestino of a
// settlement is stored on the transfer however the settlement reaches it
// (applied at once, a hold's capture, held then re-applied, held then
// applied by an operator), and from then on that client reads the
// transfer; no other client does (the same not-found as an unknown id),
// nor does the titular before the settlement names it. A rejection names
// nobody.
func TestProjectionStoresTheDestinationHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	payee := transfer.Viewer{Client: "client-b"}
	sees := func(v transfer.Viewer, id uuid.UUID) bool {
		t.Helper()
		_, err := f.svc.Get(ctx, id, v)
		if err != nil && !errors.Is(err, transfer.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	holderOf := func(id uuid.UUID) string {
		t.Helper()
		tr, err := f.svc.Get(ctx, id, operator)
		if err != nil {
			t.Fatal(err)
		}
		return tr.DestHolder
	}
	handle := func(rs ...broker.Record) {
		t.Helper()
		if err := f.proj.Handle(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}

	immediate, rejectedOne, hold := f.pending(t), f.pending(t), f.hold(t)
	if sees(payee, immediate) {
		t.Fatal("the destination's titular reads a transfer no settlement named it for")
	}
	handle(record(t, topics.Settled, paidTo(settled(immediate), "client-b")),
		record(t, topics.Rejected, rejected(rejectedOne, events.ReasonInsufficientFunds)),
		recordOf(t, reserved(hold)))
	handle(recordOf(t, paidTo(captured(hold, 40), "client-b")))

	// Held, then re-applied once its transfer is visible.
	late, request := uuid.New(), uuid.New()
	handle(record(t, topics.Settled, bound(paidTo(settled(late), "client-b"), request)))
	now := time.Now().UTC()
	if _, err := f.store.Create(ctx, transfer.Creation{
		Transfer: transfer.Transfer{ID: late, Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL",
			Status: transfer.StatusPending, Client: "client-a", CreatedAt: now, UpdatedAt: now},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")},
		Event: events.Message{ID: request, AggregateType: transfer.AggregateType, AggregateID: late.String(), Topic: topics.Requested,
			Key: "CC-001", Type: events.TypeRequested, Payload: []byte("{}")},
	}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := f.store.ReapplyHeld(ctx, time.Hour, 100); err != nil || n != 1 {
		t.Fatalf("ReapplyHeld = %d, %v; want 1", n, err)
	}

	// Held for another request, then applied by an operator against the
	// ledger's record.
	judged := f.pending(t)
	handle(record(t, topics.Settled, bound(paidTo(settled(judged), "client-b"), uuid.New())))
	if _, err := f.store.ApplyHeld(ctx, events.DerivedID(events.KindSettled, judged), transfer.Settlement{TransferID: judged,
		Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL", Client: "client-a", Result: transfer.StatusSettled},
		transfer.Resolution{Operator: "ana"}); err != nil {
		t.Fatalf("operator's ApplyHeld: %v", err)
	}

	for _, tc := range []struct {
		name   string
		id     uuid.UUID
		holder string
	}{
		{"settled at once", immediate, "client-b"},
		{"rejected", rejectedOne, ""},
		{"hold captured", hold, "client-b"},
		{"held, re-applied", late, "client-b"},
		{"held, applied by an operator", judged, "client-b"},
	} {
		if got := holderOf(tc.id); got != tc.holder {
			t.Errorf("%s: titular_destino %q, want %q", tc.name, got, tc.holder)
		}
		if got := sees(payee, tc.id); got != (tc.holder != "") {
			t.Errorf("%s: the destination's titular reads it: %v, want %v", tc.name, got, tc.holder != "")
		}
		if !sees(transfer.Viewer{Client: "client-a"}, tc.id) || sees(transfer.Viewer{Client: "client-c"}, tc.id) {
			t.Errorf("%s: the creator must read it and another client must not", tc.name)
		}
	}
}

// TestProjectionRefusesAnOversizedHolder: a titularDestino longer than a
// titular can be is a poison record: nothing applied, nothing marked.
func TestProjectionRefusesAnOversizedHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.pending(t)
	err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, paidTo(settled(id), strings.Repeat("x", transfer.MaxHolderLen+1)))})
	if err == nil || !consumer.IsPermanent(err) {
		t.Fatalf("Handle = %v, want a permanent error", err)
	}
	if got, err := f.svc.Get(ctx, id, operator); err != nil || got.Status != transfer.StatusPending || got.DestHolder != "" {
		t.Errorf("transfer after the poison record: %+v, %v; want PENDENTE with no titular", got, err)
	}
	if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, paidTo(settled(id), strings.Repeat("x", transfer.MaxHolderLen)))}); err != nil {
		t.Fatalf("the same settlement with a titular of the longest size: %v", err)
	}
}
