package consume_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// requestOf returns the request event id stored on transfer id, which
// must be its TransferenciaSolicitada's, the outbox row written with it.
func (f fixture) requestOf(t *testing.T, id uuid.UUID) uuid.UUID {
	t.Helper()
	var stored, outboxed uuid.UUID
	if err := f.db.QueryRow(context.Background(), `SELECT t.evento_solicitacao_id, o.id FROM transferencia AS t
JOIN outbox_event AS o ON o.aggregate_id = t.id::text AND o.event_type = $2 WHERE t.id = $1`, id, events.TypeRequested).
		Scan(&stored, &outboxed); err != nil {
		t.Fatal(err)
	}
	if stored != outboxed || stored == uuid.Nil {
		t.Fatalf("transfer %s stores request event %s, its outbox row is %s", id, stored, outboxed)
	}
	return stored
}

// heldRow is a held result's resolution and binding, "" and uuid.Nil
// where NULL; found is false when the event is not held.
func (f fixture) heldRow(t *testing.T, eventID uuid.UUID) (resolution, by string, binding uuid.UUID, found bool) {
	t.Helper()
	var b *uuid.UUID
	err := f.db.QueryRow(context.Background(), `SELECT coalesce(resolucao, ''), coalesce(resolvido_por, ''), evento_solicitacao_id
FROM resultado_retido WHERE evento_id = $1`, eventID).Scan(&resolution, &by, &b)
	if err != nil {
		return "", "", uuid.Nil, false
	}
	if b != nil {
		binding = *b
	}
	return resolution, by, binding, true
}

func bound[E events.Settled | events.Rejected](e E, request uuid.UUID) E {
	switch v := any(&e).(type) {
	case *events.Settled:
		v.RequestEventID = request
	case *events.Rejected:
		v.RequestEventID = request
	}
	return e
}

// TestResultAppliesOnlyToItsRequest: a result applies to the transfer it
// was decided for (its eventoSolicitacaoId is the transfer's request
// event), or when nothing contradicts that (the record or the transfer
// has no binding); a result decided for another request with the same
// transfer id (a retry that recreated a lost transfer, with this or
// another body) is held, the transfer untouched, one by one and in a
// batch, and a later bound result in the same batch still applies.
func TestResultAppliesOnlyToItsRequest(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		name := "one by one"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			apply := func(ms ...broker.Record) {
				t.Helper()
				if batch {
					if err := f.proj.Handle(ctx, ms); err != nil {
						t.Fatal(err)
					}
					return
				}
				for _, m := range ms {
					if err := f.proj.Handle(ctx, []broker.Record{m}); err != nil {
						t.Fatal(err)
					}
				}
			}
			status := func(id uuid.UUID) transfer.Status {
				t.Helper()
				got, err := f.svc.Get(ctx, id, operator)
				if err != nil {
					t.Fatal(err)
				}
				return got.Status
			}

			matching, other, unbound, legacy := f.pending(t), f.pending(t), f.pending(t), f.pending(t)
			if _, err := f.db.Exec(ctx, `UPDATE transferencia SET evento_solicitacao_id = NULL WHERE id = $1`, legacy); err != nil {
				t.Fatal(err)
			}
			stranger := uuid.New()
			apply(
				// decided for another request of the same id, then its
				// own antifraud rejection: the first is held, the second
				// applies
				record(t, topics.Settled, bound(settled(other), stranger)),
				record(t, topics.Rejected, bound(blocked(other, events.ReasonBlockedByAntifraud), f.requestOf(t, other))),
				record(t, topics.Settled, bound(settled(matching), f.requestOf(t, matching))),
				record(t, topics.Settled, settled(unbound)),
				record(t, topics.Settled, bound(settled(legacy), stranger)),
			)
			for id, want := range map[uuid.UUID]transfer.Status{
				matching: transfer.StatusSettled, other: transfer.StatusRejected,
				unbound: transfer.StatusSettled, legacy: transfer.StatusSettled,
			} {
				if got := status(id); got != want {
					t.Errorf("transfer %s: %s, want %s", id, got, want)
				}
			}
			res, _, binding, found := f.heldRow(t, events.DerivedID(events.KindSettled, other))
			if !found || res != "" || binding != stranger {
				t.Errorf("the result for another request: held %v, resolution %q, binding %s; want held, unresolved, %s", found, res, binding, stranger)
			}
			for _, id := range []uuid.UUID{matching, unbound, legacy} {
				if _, _, _, found := f.heldRow(t, events.DerivedID(events.KindSettled, id)); found {
					t.Errorf("the result of %s was held, want applied", id)
				}
			}

			// A PENDENTE transfer with another request is not moved by it.
			pending := f.pending(t)
			apply(record(t, topics.Settled, bound(settled(pending), stranger)))
			if got := status(pending); got != transfer.StatusPending {
				t.Errorf("a result for another request moved the transfer to %s", got)
			}
			// The re-apply task does not apply it either: it is for another
			// request, an operator's case.
			if _, c, err := f.store.ReapplyHeld(ctx, time.Hour, 100); err != nil || len(c) != 0 {
				t.Errorf("ReapplyHeld = %d, %v; want 0", len(c), err)
			}
			if got := status(pending); got != transfer.StatusPending {
				t.Errorf("re-apply moved the transfer of another request to %s", got)
			}
		})
	}
}

// createFor creates transfer id PENDENTE with request as the eventoId of
// its TransferenciaSolicitada, as a retry that recreated it would.
func (f fixture) createFor(t *testing.T, id, request uuid.UUID) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := f.store.Create(context.Background(), transfer.Creation{
		Transfer: transfer.Transfer{ID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL",
			Status: transfer.StatusPending, Client: "client-a", CreatedAt: now, UpdatedAt: now},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")},
		Event: events.Message{ID: request, AggregateType: transfer.AggregateType, AggregateID: id.String(), Topic: topics.Requested,
			Key: "CC-001", Type: events.TypeRequested, Payload: []byte("{}")},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestReapplyHeld: a held result bound to a request is applied by
// ReapplyHeld once a transfer of that request exists, resolved APLICADO by
// postgres.ReappliedBy, only while within the window; one without a
// binding, one past the window and one for another request stay held,
// counted overdue once past the window.
func TestReapplyHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	create := func(id, request uuid.UUID) { f.createFor(t, id, request) }
	early, late, unbound, other := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	reqEarly, reqLate, reqOther := uuid.New(), uuid.New(), uuid.New()
	if err := f.proj.Handle(ctx, []broker.Record{
		record(t, topics.Settled, bound(settled(early), reqEarly)),
		record(t, topics.Rejected, bound(rejected(late, events.ReasonInsufficientFunds), reqLate)),
		record(t, topics.Settled, settled(unbound)),
		record(t, topics.Settled, bound(settled(other), uuid.New())),
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.store.CountHeld(ctx); err != nil || n != 4 {
		t.Fatalf("CountHeld = %d, %v; want 4", n, err)
	}
	// Nothing to apply while no transfer is visible.
	if _, c, err := f.store.ReapplyHeld(ctx, time.Hour, 100); err != nil || len(c) != 0 {
		t.Fatalf("ReapplyHeld before the transfers exist = %d, %v; want 0", len(c), err)
	}
	lateEvent := events.DerivedID(events.KindRejectedLedger, late)
	if _, err := f.db.Exec(ctx, `UPDATE resultado_retido SET recebido_em = now() - interval '2 hours' WHERE evento_id = $1`, lateEvent); err != nil {
		t.Fatal(err)
	}
	create(early, reqEarly)
	create(late, reqLate)
	create(unbound, uuid.New())
	create(other, reqOther)
	_, created, err := f.store.ReapplyHeld(ctx, time.Hour, 100)
	n := len(created)
	if err != nil || n != 1 {
		t.Fatalf("ReapplyHeld = %d, %v; want 1", n, err)
	}
	for id, want := range map[uuid.UUID]transfer.Status{early: transfer.StatusSettled, late: transfer.StatusPending,
		unbound: transfer.StatusPending, other: transfer.StatusPending} {
		got, err := f.svc.Get(ctx, id, operator)
		if err != nil || got.Status != want {
			t.Errorf("transfer %s: %s, %v; want %s", id, got.Status, err, want)
		}
	}
	if res, by, _, _ := f.heldRow(t, events.DerivedID(events.KindSettled, early)); res != transfer.ResolutionApplied || by != postgres.ReappliedBy {
		t.Errorf("re-applied row resolved %q by %q, want %s by %s", res, by, transfer.ResolutionApplied, postgres.ReappliedBy)
	}
	if _, c, err := f.store.ReapplyHeld(ctx, time.Hour, 100); err != nil || len(c) != 0 {
		t.Errorf("second ReapplyHeld = %d, %v; want 0", len(c), err)
	}
	if n, err := f.store.CountHeld(ctx); err != nil || n != 3 {
		t.Errorf("CountHeld = %d, %v; want 3", n, err)
	}
	if n, err := f.store.CountHeldOverdue(ctx, time.Hour); err != nil || n != 1 {
		t.Errorf("CountHeldOverdue = %d, %v; want 1 (the one past the window)", n, err)
	}
	// An operator may still apply the overdue one (against the ledger's
	// record), and the held result of another request is theirs to judge.
	if _, err := f.store.ApplyHeld(ctx, lateEvent, transfer.Settlement{TransferID: late, Source: "CC-001", Destination: "CC-002",
		AmountCents: 100, Currency: "BRL", Client: "client-a", RequestEventID: reqLate, Result: transfer.StatusRejected,
		Reason: events.ReasonInsufficientFunds}, transfer.Resolution{Operator: "ana"}); err != nil {
		t.Errorf("operator's ApplyHeld of the overdue result: %v", err)
	}
}

// TestUnderivedEventIDIsPoison: a result whose eventoId is not the id
// derived for its transfer and type is a poison record (permanent error),
// marks nothing in the inbox, holds nothing and moves nothing: a record
// for transfer X bearing transfer Y's settlement id does not burn it, and
// Y's real result applies afterwards. In a batch, the records before it
// are applied and the batch stops there.
func TestUnderivedEventIDIsPoison(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	y, x := f.pending(t), f.pending(t)
	ySettled := events.DerivedID(events.KindSettled, y)
	forged := []broker.Record{
		// a rejection of X carrying Y's settlement id
		record(t, topics.Rejected, events.Rejected{EventID: ySettled, TransferID: x, Reason: events.ReasonInsufficientFunds, OccurredAt: time.Now().UTC()}),
		// a random id
		record(t, topics.Settled, events.Settled{EventID: uuid.New(), TransferID: x, OccurredAt: time.Now().UTC()}),
		// the id of another kind: antifraud's analysis, not a result
		record(t, topics.Settled, events.Settled{EventID: events.DerivedID(events.KindAnalysed, x), TransferID: x, OccurredAt: time.Now().UTC()}),
		// a settlement bearing a rejection's id
		record(t, topics.Settled, events.Settled{EventID: events.DerivedID(events.KindRejectedLedger, x), TransferID: x, OccurredAt: time.Now().UTC()}),
		// a result for an unknown transfer with a random id: not held
		record(t, topics.Settled, events.Settled{EventID: uuid.New(), TransferID: uuid.New(), OccurredAt: time.Now().UTC()}),
	}
	for i, m := range forged {
		err := f.proj.Handle(ctx, []broker.Record{m})
		if !consumer.IsPermanent(err) || !errors.Is(err, events.ErrUnderivedID) {
			t.Errorf("record %d: Handle = %v, want a permanent ErrUnderivedID", i, err)
		}
	}
	var marks, held int
	if err := f.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox_event), (SELECT count(*) FROM resultado_retido)`).Scan(&marks, &held); err != nil {
		t.Fatal(err)
	}
	if marks != 0 || held != 0 {
		t.Errorf("%d inbox marks, %d held rows after poison records; want 0, 0", marks, held)
	}
	for _, id := range []uuid.UUID{x, y} {
		if got, err := f.svc.Get(ctx, id, operator); err != nil || got.Status != transfer.StatusPending {
			t.Errorf("transfer %s: %s, %v; want PENDENTE", id, got.Status, err)
		}
	}
	// Y's real settlement applies; in a batch a poison record stops it
	// after the records before it.
	err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, settled(y)), forged[0], record(t, topics.Settled, settled(x))})
	var bf *consumer.BatchFailure
	if !errors.As(err, &bf) || bf.Handled != 1 || !consumer.IsPermanent(bf.Err) {
		t.Fatalf("Handle = %v, want a BatchFailure after 1 record, permanent", err)
	}
	if got, err := f.svc.Get(ctx, y, operator); err != nil || got.Status != transfer.StatusSettled {
		t.Errorf("transfer Y: %s, %v; want LIQUIDADA (its id was not burnt)", got.Status, err)
	}
	if got, err := f.svc.Get(ctx, x, operator); err != nil || got.Status != transfer.StatusPending {
		t.Errorf("transfer X: %s, %v; want PENDENTE (after the poison record)", got.Status, err)
	}
}
