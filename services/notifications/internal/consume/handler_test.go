package consume_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/notifications/internal/consume"
	"github.com/paysuite/payments/services/notifications/internal/notify"
)

type recorder struct{ got []notify.Notification }

func (r *recorder) NotifyBatch(_ context.Context, ns []notify.Notification) error {
	r.got = append(r.got, ns...)
	return nil
}

func TestHandle(t *testing.T) {
	topics := events.DefaultTopics
	transfer := uuid.MustParse("4c1f5f0e-8f3e-4bde-a5ad-0d2f4b1f9a21")
	// Each result bears the id derived for its transfer and kind.
	sid, rid := events.DerivedID(events.KindSettled, transfer), events.DerivedID(events.KindRejectedLedger, transfer)
	at := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	settled := `{"eventoId":"` + sid.String() + `","transferenciaId":"` + transfer.String() + `","ocorridoEm":"2026-11-29T22:00:00Z","extra":1}`
	rejected := `{"eventoId":"` + rid.String() + `","transferenciaId":"` + transfer.String() + `","motivo":"CONTA_INEXISTENTE","ocorridoEm":"2026-11-29T22:00:00Z"}`
	randomID := `{"eventoId":"0b9c6c1e-52d9-4c63-a0ab-5f7d0e4f8a10","transferenciaId":"` + transfer.String() + `","ocorridoEm":"2026-11-29T22:00:00Z"}`
	otherTransfer := `{"eventoId":"` + sid.String() + `","transferenciaId":"` + uuid.NewString() + `","motivo":"SALDO_INSUFICIENTE","ocorridoEm":"2026-11-29T22:00:00Z"}`
	resid, cid := events.DerivedID(events.KindReserved, transfer), events.DerivedID(events.KindCancelled, transfer)
	reservedJSON := `{"eventoId":"` + resid.String() + `","transferenciaId":"` + transfer.String() + `","valorEmCentavos":700,"expiraEm":"2026-11-30T22:00:00Z","ocorridoEm":"2026-11-29T22:00:00Z"}`
	expiredJSON := `{"eventoId":"` + cid.String() + `","transferenciaId":"` + transfer.String() + `","motivo":"EXPIRADA","ocorridoEm":"2026-11-29T22:00:00Z"}`
	cancelledJSON := `{"eventoId":"` + cid.String() + `","transferenciaId":"` + transfer.String() + `","motivo":"CANCELADA_PELO_CLIENTE","ocorridoEm":"2026-11-29T22:00:00Z"}`
	capturedJSON := `{"eventoId":"` + sid.String() + `","transferenciaId":"` + transfer.String() + `","valorEmCentavos":300,"ocorridoEm":"2026-11-29T22:00:00Z"}`
	refund := uuid.MustParse("9a7d3c52-1b0e-4e55-8d7f-2f6c1e0b4a33")
	rsid, rrid := events.DerivedID(events.KindRefundSettled, refund), events.DerivedID(events.KindRefundRejected, refund)
	refundSettledJSON := `{"eventoId":"` + rsid.String() + `","estornoId":"` + refund.String() + `","transferenciaId":"` + transfer.String() + `","valorEmCentavos":250,"ocorridoEm":"2026-11-29T22:00:00Z"}`
	refundRejectedJSON := `{"eventoId":"` + rrid.String() + `","estornoId":"` + refund.String() + `","transferenciaId":"` + transfer.String() + `","motivo":"VALOR_EXCEDE_ESTORNAVEL","ocorridoEm":"2026-11-29T22:00:00Z"}`
	underived := func(err error) bool { return errors.Is(err, events.ErrUnderivedID) && consumer.IsPermanent(err) }
	fromRetry := broker.Record{Topic: topics.Rejected + "-retry-2000", Key: []byte("CC-9"), Value: []byte(rejected)}

	tests := []struct {
		name    string
		msg     broker.Record
		want    []notify.Notification
		wantErr func(error) bool
	}{
		{name: "settled", msg: broker.Record{Topic: topics.Settled, Key: []byte("CC-1"), Value: []byte(settled)},
			want: []notify.Notification{{EventID: sid, EventType: events.TypeSettled, TransferID: transfer, Status: "LIQUIDADA", OccurredAt: at, Account: "CC-1", Topic: topics.Settled}}},
		{name: "reserved", msg: broker.Record{Topic: topics.Reserved, Key: []byte("CC-1"), Value: []byte(reservedJSON)},
			want: []notify.Notification{{EventID: resid, EventType: events.TypeReserved, TransferID: transfer, Status: "RESERVADA",
				AmountCents: 700, ExpiresAt: at.Add(24 * time.Hour), OccurredAt: at, Account: "CC-1", Topic: topics.Reserved}}},
		{name: "captured", msg: broker.Record{Topic: topics.Settled, Key: []byte("CC-1"), Value: []byte(capturedJSON)},
			want: []notify.Notification{{EventID: sid, EventType: events.TypeSettled, TransferID: transfer, Status: "LIQUIDADA",
				AmountCents: 300, OccurredAt: at, Account: "CC-1", Topic: topics.Settled}}},
		{name: "cancelled by the client", msg: broker.Record{Topic: topics.Cancelled, Key: []byte("CC-1"), Value: []byte(cancelledJSON)},
			want: []notify.Notification{{EventID: cid, EventType: events.TypeCancelled, TransferID: transfer, Status: "CANCELADA",
				Reason: events.ReasonCancelledByClient, OccurredAt: at, Account: "CC-1", Topic: topics.Cancelled}}},
		{name: "expired, from a retry topic", msg: broker.Record{Topic: topics.Cancelled + "-retry-1000", Key: []byte("CC-1"), Value: []byte(expiredJSON)},
			want: []notify.Notification{{EventID: cid, EventType: events.TypeCancelled, TransferID: transfer, Status: "EXPIRADA",
				Reason: events.ReasonExpired, OccurredAt: at, Account: "CC-1", Topic: topics.Cancelled + "-retry-1000"}}},
		{name: "a reservation without expiraEm", msg: broker.Record{Topic: topics.Reserved, Value: []byte(cancelledJSON)},
			wantErr: func(err error) bool { return errors.Is(err, events.ErrMalformed) && consumer.IsPermanent(err) }},
		{name: "a cancellation's id on the reserved topic", msg: broker.Record{Topic: topics.Reserved,
			Value: []byte(strings.Replace(reservedJSON, resid.String(), cid.String(), 1))}, wantErr: underived},
		{name: "refund settled", msg: broker.Record{Topic: topics.RefundSettled, Key: []byte("CC-1"), Value: []byte(refundSettledJSON)},
			want: []notify.Notification{{EventID: rsid, EventType: events.TypeRefundSettled, TransferID: transfer, RefundID: refund,
				Status: "LIQUIDADO", AmountCents: 250, OccurredAt: at, Account: "CC-1", Topic: topics.RefundSettled}}},
		{name: "refund rejected, from a retry topic", msg: broker.Record{Topic: topics.RefundRejected + "-retry-4000", Key: []byte("CC-1"), Value: []byte(refundRejectedJSON)},
			want: []notify.Notification{{EventID: rrid, EventType: events.TypeRefundRejected, TransferID: transfer, RefundID: refund,
				Status: "REJEITADO", Reason: events.ReasonExceedsRefundable, OccurredAt: at, Account: "CC-1", Topic: topics.RefundRejected + "-retry-4000"}}},
		{name: "a refund's rejection id on the settled refunds' topic", msg: broker.Record{Topic: topics.RefundSettled,
			Value: []byte(strings.Replace(refundSettledJSON, rsid.String(), rrid.String(), 1))}, wantErr: underived},
		{name: "a refund result whose id is derived from its transfer, not its refund", msg: broker.Record{Topic: topics.RefundSettled,
			Value: []byte(strings.Replace(refundSettledJSON, rsid.String(), events.DerivedID(events.KindRefundSettled, transfer).String(), 1))}, wantErr: underived},
		{name: "a refund rejection with a transfer's motivo", msg: broker.Record{Topic: topics.RefundRejected,
			Value: []byte(strings.Replace(refundRejectedJSON, "VALOR_EXCEDE_ESTORNAVEL", "BLOQUEADA_ANTIFRAUDE", 1))},
			wantErr: func(err error) bool { return errors.Is(err, events.ErrMalformed) && consumer.IsPermanent(err) }},
		{name: "an event id not derived for the transfer", msg: broker.Record{Topic: topics.Settled, Value: []byte(randomID)}, wantErr: underived},
		{name: "another transfer's event id", msg: broker.Record{Topic: topics.Rejected, Value: []byte(otherTransfer)}, wantErr: underived},
		{name: "a rejection's id on the settled topic", msg: broker.Record{Topic: topics.Settled, Value: []byte(rejected)}, wantErr: underived},
		{name: "rejected from a retry topic", msg: fromRetry,
			want: []notify.Notification{{EventID: rid, EventType: events.TypeRejected, TransferID: transfer, Status: "REJEITADA",
				Reason: "CONTA_INEXISTENTE", OccurredAt: at, Account: "CC-9", Topic: topics.Rejected + "-retry-2000"}}},
		{name: "malformed", msg: broker.Record{Topic: topics.Settled, Value: []byte(`nope`)},
			wantErr: func(err error) bool { return errors.Is(err, events.ErrMalformed) && consumer.IsPermanent(err) }},
		{name: "rejected without motivo", msg: broker.Record{Topic: topics.Rejected, Value: []byte(settled)},
			wantErr: func(err error) bool { return errors.Is(err, events.ErrMalformed) }},
		{name: "unexpected topic", msg: broker.Record{Topic: "other", Value: []byte(settled)},
			wantErr: consumer.IsPermanent},
		{name: "rejected whose header claims liquidada", msg: broker.Record{Topic: topics.Rejected, Key: []byte("CC-9"), Value: []byte(rejected),
			Headers: []broker.Header{{Key: dlt.HeaderDLTOriginalTopic, Value: []byte(topics.Settled)}}},
			want: []notify.Notification{{EventID: rid, EventType: events.TypeRejected, TransferID: transfer, Status: "REJEITADA",
				Reason: "CONTA_INEXISTENTE", OccurredAt: at, Account: "CC-9", Topic: topics.Rejected}}},
		{name: "settled retry whose header claims rejeitada", msg: broker.Record{Topic: topics.Settled + "-retry-4000", Key: []byte("CC-1"), Value: []byte(settled),
			Headers: []broker.Header{{Key: dlt.HeaderDLTOriginalTopic, Value: []byte(topics.Rejected)}}},
			want: []notify.Notification{{EventID: sid, EventType: events.TypeSettled, TransferID: transfer, Status: "LIQUIDADA",
				OccurredAt: at, Account: "CC-1", Topic: topics.Settled + "-retry-4000"}}},
		{name: "a topic named like a retry topic of no known delay", msg: broker.Record{Topic: topics.Settled + "-retry-9999", Value: []byte(settled)},
			wantErr: consumer.IsPermanent},
		{name: "the DLT itself", msg: broker.Record{Topic: events.DLT(topics.Settled), Value: []byte(settled),
			Headers: []broker.Header{{Key: dlt.HeaderDLTOriginalTopic, Value: []byte(topics.Settled)}}},
			wantErr: consumer.IsPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			err := consume.NewHandler(r, topics).Handle(context.Background(), []broker.Record{tt.msg})
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("Handle() = %v, want a matching error", err)
				}
				if len(r.got) != 0 {
					t.Fatalf("notified %d times on error", len(r.got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.got); diff != "" {
				t.Errorf("notifications mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
