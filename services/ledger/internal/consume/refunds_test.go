package consume_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/consume"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// refundRecord is an EstornoSolicitado of refund id of cents of transfer
// tr (A to B), asked by ledgertest.Client and signed as the transfers
// service signs unless unsigned.
func refundRecord(t *testing.T, id, tr uuid.UUID, cents int64, unsigned bool) broker.Record {
	t.Helper()
	ev := events.RefundRequested{EventID: uuid.New(), RefundID: id, TransferID: tr, SourceAccount: "A", DestAccount: "B",
		AmountCents: cents, Currency: "BRL", ClientID: ledgertest.Client, OccurredAt: time.Now().UTC()}
	if !unsigned {
		ev.Authorization = ledgertest.AuthorizeRefund(transfersig.RefundClaim{RefundID: id, TransferID: tr, Source: "A",
			Destination: "B", AmountCents: cents, Currency: "BRL", Client: ledgertest.Client})
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Record{Key: []byte("A"), Value: b, Headers: []broker.Header{
		{Key: events.HeaderEventID, Value: []byte(ev.EventID.String())},
		{Key: events.HeaderEventType, Value: []byte(events.TypeRefundRequested)},
	}}
}

// TestRefundConsumer: the refunds of one partition, read by the ledger's
// consumer loop in batches: a partial refund, a second one, a redelivery
// of the first, one that would exceed, an unsigned one and a malformed
// record (the DLT at once, the records after it decided), each decided
// once, with its result in the outbox and counted.
func TestRefundConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	topics := ledgertest.Topics
	topics.RefundRequested = e.topic
	svc := ledger.NewService(e.store, ledger.Rules{Topics: topics, Keys: ledgertest.TransferKeys}, nil)
	tr := uuid.New()
	rs, err := svc.Settle(context.Background(), []ledger.Transfer{{ID: tr, EventID: uuid.New(), Source: "A", Dest: "B",
		AmountCents: 500, Currency: "BRL", ClientID: ledgertest.Client,
		Authorization: ledgertest.Authorize(transfersig.Claim{TransferID: tr, Source: "A", Destination: "B", AmountCents: 500,
			Currency: "BRL", Client: ledgertest.Client})}})
	if err != nil || rs[0].Outcome != ledger.Settled {
		t.Fatalf("settle: %+v, %v", rs, err)
	}

	first, second, over, forged := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	firstRecord := refundRecord(t, first, tr, 200, false)
	e.produce(t,
		firstRecord,
		refundRecord(t, second, tr, 250, false),
		broker.Record{Key: []byte("A"), Value: []byte(`{"eventoId": "not a uuid"}`)},
		firstRecord, // a redelivery
		refundRecord(t, over, tr, 51, false),
		refundRecord(t, forged, tr, 10, true),
	)
	h := consume.NewRefunds(svc, e.logger(), e.metrics)
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: time.Second}, Retries: 3}
	e.start(t, consumer.Config{Broker: broker.Config{Brokers: e.brokers}, Group: kafkatest.Group(t, "ledger-estornos"),
		Topics: []string{e.topic}, Handler: h.Handle, MaxBatch: 50, Policy: policy, Publisher: e.writer, Logger: e.logger(),
		Metrics: consumer.NewMetrics(e.reg)})

	dead := e.readDLT(t, 1)
	if o, _ := dlt.ClaimedOrigin(dead[0]); o.Offset != 2 {
		t.Errorf("DLT record from offset %d, want 2", o.Offset)
	}
	refunds := func(result, reason string) float64 {
		return counter(t, e.reg, "ledger_refunds_total", map[string]string{"result": result, "reason": reason})
	}
	poll.True(t, 60*time.Second, "every refund decided", func() bool {
		return refunds("LIQUIDADO", "")+refunds("REJEITADO", events.ReasonExceedsRefundable)+
			refunds("REJEITADO", events.ReasonUnauthorizedSource)+refunds("DUPLICADO", "") == 5
	})
	for _, c := range []struct {
		result, reason string
		want           float64
	}{
		{"LIQUIDADO", "", 2}, {"DUPLICADO", "", 1},
		{"REJEITADO", events.ReasonExceedsRefundable, 1}, {"REJEITADO", events.ReasonUnauthorizedSource, 1},
	} {
		if n := refunds(c.result, c.reason); n != c.want {
			t.Errorf("refunds %s %s = %v, want %v", c.result, c.reason, n, c.want)
		}
	}
	e.checkBalances(t, map[string]int64{"A": 950, "B": 50, "__FUNDING__BRL": -1000})
	var got []string
	for _, ev := range ledgertest.ReadState(t, e.db).Events {
		if strings.HasPrefix(ev.Type, "Estorno") {
			got = append(got, ev.Type+" "+ev.Payload["estornoId"].(string)+" "+ev.Topic+" "+ev.Key)
		}
	}
	want := []string{
		events.TypeRefundSettled + " " + first.String() + " " + topics.RefundSettled + " A",
		events.TypeRefundSettled + " " + second.String() + " " + topics.RefundSettled + " A",
		events.TypeRefundRejected + " " + over.String() + " " + topics.RefundRejected + " A",
		events.TypeRefundRejected + " " + forged.String() + " " + topics.RefundRejected + " A",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("refund events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(e.logs.String(), `"refund_id":"`+first.String()+`"`) {
		t.Errorf("no log line names refund %s:\n%s", first, e.logs.String())
	}
	ledgertest.CheckInvariants(t, e.db)
}
