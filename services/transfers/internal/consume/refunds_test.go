package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// settledFor makes a transfer of 100 cents LIQUIDADA, as the ledger's
// TransferenciaLiquidada does.
func (f fixture) settledFor(t *testing.T) uuid.UUID {
	t.Helper()
	id := f.pending(t)
	if err := f.proj.Handle(context.Background(), []broker.Record{record(t, topics.Settled, settled(id))}); err != nil {
		t.Fatal(err)
	}
	return id
}

// refund asks, as an operator, for a refund of amount cents of transfer
// id, and returns its id.
func (f fixture) refund(t *testing.T, id uuid.UUID, amount int64) uuid.UUID {
	t.Helper()
	key := uuid.New()
	_, _, err := f.svc.Refund(context.Background(), transfer.RefundSubmission{ID: key, TransferID: id, AmountCents: &amount,
		Client: "operator", Operator: true, Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}})
	if err != nil {
		t.Fatalf("refund of %d: %v", amount, err)
	}
	return key
}

func refundSettled(transferID, refundID uuid.UUID, amount int64) events.RefundSettled {
	return events.RefundSettled{EventID: events.DerivedID(events.KindRefundSettled, refundID), RefundID: refundID, TransferID: transferID,
		AmountCents: amount, OccurredAt: time.Now().UTC()}
}

func refundRejected(transferID, refundID uuid.UUID, reason string) events.RefundRejected {
	return events.RefundRejected{EventID: events.DerivedID(events.KindRefundRejected, refundID), RefundID: refundID, TransferID: transferID,
		Reason: reason, OccurredAt: time.Now().UTC()}
}

type refundState struct {
	Status   transfer.RefundStatus
	Reason   string
	Refunded int64 // the transfer's valorEstornadoEmCentavos
	Transfer transfer.Status
}

func (f fixture) refundState(t *testing.T, id, refundID uuid.UUID) refundState {
	t.Helper()
	ctx := context.Background()
	r, err := f.svc.GetRefund(ctx, id, refundID, operator)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := f.svc.Get(ctx, id, operator)
	if err != nil {
		t.Fatal(err)
	}
	return refundState{r.Status, r.Reason, tr.RefundedCents, tr.Status}
}

// TestProjectionOfRefunds: the ledger's refund results move a refund
// PENDENTE -> LIQUIDADO (adding its amount to the transfer's
// valorEstornadoEmCentavos) or REJEITADO (with its motivo), forward only,
// each event id once, in one batch or one by one; the transfer stays
// LIQUIDADA.
func TestProjectionOfRefunds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		records func(id, refund uuid.UUID) []broker.Record
		want    refundState
	}{
		{"settled", func(id, r uuid.UUID) []broker.Record {
			return []broker.Record{record(t, topics.RefundSettled, refundSettled(id, r, 40))}
		}, refundState{transfer.RefundSettled, "", 40, transfer.StatusSettled}},
		{"rejected", func(id, r uuid.UUID) []broker.Record {
			return []broker.Record{record(t, topics.RefundRejected, refundRejected(id, r, events.ReasonInsufficientFunds))}
		}, refundState{transfer.RefundRejected, events.ReasonInsufficientFunds, 0, transfer.StatusSettled}},
		{"settled twice (same event)", func(id, r uuid.UUID) []broker.Record {
			m := record(t, topics.RefundSettled, refundSettled(id, r, 40))
			return []broker.Record{m, m}
		}, refundState{transfer.RefundSettled, "", 40, transfer.StatusSettled}},
		{"rejected after settled", func(id, r uuid.UUID) []broker.Record {
			return []broker.Record{record(t, topics.RefundSettled, refundSettled(id, r, 40)),
				record(t, topics.RefundRejected, refundRejected(id, r, events.ReasonExceedsRefundable))}
		}, refundState{transfer.RefundSettled, "", 40, transfer.StatusSettled}},
		{"settled after rejected", func(id, r uuid.UUID) []broker.Record {
			return []broker.Record{record(t, topics.RefundRejected, refundRejected(id, r, events.ReasonNotSettled)),
				record(t, topics.RefundSettled, refundSettled(id, r, 40))}
		}, refundState{transfer.RefundRejected, events.ReasonNotSettled, 0, transfer.StatusSettled}},
	}
	for _, tt := range tests {
		for _, batch := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: " (one batch)", false: ""}[batch], func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				ctx := context.Background()
				id := f.settledFor(t)
				r := f.refund(t, id, 40)
				ms := tt.records(id, r)
				if batch {
					if err := f.proj.Handle(ctx, ms); err != nil {
						t.Fatal(err)
					}
				} else {
					for i, m := range ms {
						if err := f.proj.Handle(ctx, []broker.Record{m}); err != nil {
							t.Fatalf("record %d: %v", i, err)
						}
					}
				}
				if diff := cmp.Diff(tt.want, f.refundState(t, id, r)); diff != "" {
					t.Errorf("state mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestProjectionOfRefundsSums: valorEstornadoEmCentavos is the sum of the
// settled refunds only; a rejected refund frees its amount for another
// refund, a pending one does not; a duplicate changes nothing, not even
// atualizadoEm.
func TestProjectionOfRefundsSums(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.settledFor(t)
	a, b, c := f.refund(t, id, 30), f.refund(t, id, 50), f.refund(t, id, 20)
	if _, _, err := f.svc.Refund(ctx, transfer.RefundSubmission{ID: uuid.New(), TransferID: id, Client: "operator", Operator: true,
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")}}); err == nil {
		t.Fatal("a refund of a fully committed transfer was accepted")
	}
	ms := []broker.Record{record(t, topics.RefundSettled, refundSettled(id, a, 30)),
		record(t, topics.RefundRejected, refundRejected(id, b, events.ReasonInsufficientFunds)),
		record(t, topics.RefundSettled, refundSettled(id, c, 20))}
	if err := f.proj.Handle(ctx, ms[:2]); err != nil {
		t.Fatal(err)
	}
	if got := f.refundState(t, id, a).Refunded; got != 30 {
		t.Errorf("valorEstornadoEmCentavos = %d with one settled, want 30", got)
	}
	before, err := f.svc.GetRefund(ctx, id, a, operator)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Handle(ctx, ms); err != nil { // a redelivery of the first two, and the third
		t.Fatal(err)
	}
	if got := f.refundState(t, id, c); got.Refunded != 50 || got.Status != transfer.RefundSettled {
		t.Errorf("after all three: %+v, want 50 refunded", got)
	}
	if after, _ := f.svc.GetRefund(ctx, id, a, operator); !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a duplicate moved atualizadoEm from %v to %v", before.UpdatedAt, after.UpdatedAt)
	}
	// The rejected 50 is refundable again.
	f.refund(t, id, 50)
}

// TestProjectionOfRefundsPoison: refund results whose eventoId is not the
// one derived for their refund and type (a forged or mistyped result),
// that do not decode, or that lack a field, are permanent errors (DLT at
// once) and change nothing; a result for no refund of this database is
// not an error, changes nothing and is not marked in the inbox.
func TestProjectionOfRefundsPoison(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.settledFor(t)
	r := f.refund(t, id, 40)
	forged := refundSettled(id, r, 40)
	forged.EventID = uuid.New()
	swapped := refundRejected(id, r, events.ReasonInsufficientFunds)
	swapped.EventID = events.DerivedID(events.KindRefundSettled, r)
	for name, m := range map[string]broker.Record{
		"forged event id":           record(t, topics.RefundSettled, forged),
		"settled id on a rejection": record(t, topics.RefundRejected, swapped),
		"not JSON":                  {Topic: topics.RefundSettled, Value: []byte("{")},
		"unknown motivo":            record(t, topics.RefundRejected, refundRejected(id, r, "LIMITE")),
		"no amount":                 record(t, topics.RefundSettled, refundSettled(id, r, 0)),
	} {
		if err := f.proj.Handle(ctx, []broker.Record{m}); err == nil || !consumer.IsPermanent(err) {
			t.Errorf("%s: Handle = %v, want a permanent error", name, err)
		}
	}
	lost := uuid.New()
	for name, m := range map[string]broker.Record{
		"unknown refund":     record(t, topics.RefundSettled, refundSettled(id, lost, 40)),
		"another transfer's": record(t, topics.RefundSettled, refundSettled(uuid.New(), r, 40)),
		"another amount":     record(t, topics.RefundSettled, refundSettled(id, r, 41)),
	} {
		if err := f.proj.Handle(ctx, []broker.Record{m}); err != nil {
			t.Errorf("%s: Handle = %v, want nil", name, err)
		}
	}
	if got := f.refundState(t, id, r); got.Status != transfer.RefundPending || got.Refunded != 0 {
		t.Errorf("after poison and unmatched results: %+v, want PENDENTE, nothing refunded", got)
	}
	var marks int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM inbox_event WHERE event_id = ANY($1)`,
		[]uuid.UUID{events.DerivedID(events.KindRefundSettled, lost), events.DerivedID(events.KindRefundSettled, r)}).Scan(&marks); err != nil || marks != 0 {
		t.Errorf("%d inbox marks of unmatched results (%v), want 0", marks, err)
	}
	// The unmatched result, once it matches, applies.
	if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.RefundSettled, refundSettled(id, r, 40))}); err != nil {
		t.Fatal(err)
	}
	if got := f.refundState(t, id, r); got.Status != transfer.RefundSettled || got.Refunded != 40 {
		t.Errorf("after the matching result: %+v", got)
	}
}
