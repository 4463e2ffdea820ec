package transfers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestRefundThroughKafka: refunds on the transfers side, through the real
// broker and database. The ledger's TransferenciaLiquidada names the
// destination's titular; that client (with transferencias:estornar only)
// refunds part of the transfer and reads the transfer and the refund; the
// payer cannot refund it. Each refund's EstornoSolicitado is published on
// the refund topic, keyed by contaOrigem, signed over what was asked. The
// ledger's EstornoLiquidado makes one LIQUIDADO and the transfer shows
// valorEstornadoEmCentavos (still LIQUIDADA); its duplicate changes
// nothing; EstornoRejeitado makes the other REJEITADO with its motivo; a
// result with a forged eventoId goes to the DLT and changes nothing.
func TestRefundThroughKafka(t *testing.T) {
	t.Parallel()
	s := start(t)
	id := uuid.NewString()
	s.post(t, id, body("CC-001", "CC-002", 30000), nil)
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	tid := uuid.MustParse(id)
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, tid), TransferID: tid,
		OccurredAt: time.Now().UTC(), DestHolder: "client-b"})
	poll.True(t, 30*time.Second, "the transfer to be LIQUIDADA", func() bool { return s.status(t, id)["status"] == "LIQUIDADA" })

	holder := map[string]string{"Authorization": s.iss.Bearer(t, "client-b", auth.ScopeTransfersRefund, auth.ScopeTransfersRead)}
	payer := map[string]string{"Authorization": s.iss.Bearer(t, "client-a", auth.ScopeTransfersRefund, auth.ScopeTransfersRead)}
	refund := func(hdr map[string]string, key, amount string) (int, []byte) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
		for k, v := range hdr {
			h[k] = v
		}
		code, _, b := s.do(t, http.MethodPost, "/transferencias/"+id+"/estornos", h, `{"valorEmCentavos":`+amount+`}`)
		return code, b
	}
	if code, b := refund(payer, uuid.NewString(), "100"); code != http.StatusNotFound {
		t.Errorf("the payer's refund = %d %s, want 404", code, b)
	}
	settledKey, rejectedKey := uuid.NewString(), uuid.NewString()
	for key, amount := range map[string]string{settledKey: "10000", rejectedKey: "5000"} {
		if code, b := refund(holder, key, amount); code != http.StatusAccepted {
			t.Fatalf("the titular's refund = %d %s", code, b)
		}
	}
	if code, b := refund(holder, uuid.NewString(), "15001"); code != http.StatusUnprocessableEntity {
		t.Errorf("a refund over what remains = %d %s, want 422", code, b)
	}
	for name, hdr := range map[string]map[string]string{"titular": holder, "operator": nil} {
		if code, _, b := s.do(t, http.MethodGet, "/transferencias/"+id, hdr, ""); code != http.StatusOK {
			t.Errorf("GET of the transfer by the %s = %d %s", name, code, b)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	requests := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: s.topics.RefundRequested, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer requests.Close()
	verifier := verifierOf(t, s.iss.TransferKey())
	for range 2 {
		m, err := requests.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: %v", s.topics.RefundRequested, err)
		}
		var ev events.RefundRequested
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != "CC-001" || kafkatest.Header(m, events.HeaderEventType) != events.TypeRefundRequested ||
			ev.TransferID != tid || ev.ClientID != "client-b" || ev.Operator || ev.DestAccount != "CC-002" || ev.Currency != "BRL" {
			t.Errorf("refund record key %q type %q %+v", m.Key, kafkatest.Header(m, events.HeaderEventType), ev)
		}
		claim := transfersig.RefundClaim{RefundID: ev.RefundID, TransferID: ev.TransferID, Source: ev.SourceAccount, Destination: ev.DestAccount,
			AmountCents: ev.AmountCents, Currency: ev.Currency, Client: ev.ClientID, Operator: ev.Operator}
		if err := verifier.VerifyRefund(claim, ev.Authorization); err != nil {
			t.Errorf("refund %s: signature %v", ev.RefundID, err)
		}
	}

	readRefund := func(key string) map[string]any {
		t.Helper()
		code, _, b := s.do(t, http.MethodGet, "/transferencias/"+id+"/estornos/"+key, holder, "")
		if code != http.StatusOK {
			t.Fatalf("GET refund = %d %s", code, b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	sk, rk := uuid.MustParse(settledKey), uuid.MustParse(rejectedKey)
	ok := events.RefundSettled{EventID: events.DerivedID(events.KindRefundSettled, sk), RefundID: sk, TransferID: tid, AmountCents: 10000,
		OccurredAt: time.Now().UTC()}
	forged := ok
	forged.EventID = uuid.New()
	produce(t, w, s.topics.RefundSettled, events.TypeRefundSettled, ok)
	poll.True(t, 30*time.Second, "the refund to be LIQUIDADO", func() bool { return readRefund(settledKey)["status"] == "LIQUIDADO" })
	produce(t, w, s.topics.RefundSettled, events.TypeRefundSettled, ok) // a duplicate
	// The forged result, after the duplicate on its partition: once it is
	// on the DLT, the duplicate was handled.
	produce(t, w, s.topics.RefundSettled, events.TypeRefundSettled, forged)
	produce(t, w, s.topics.RefundRejected, events.TypeRefundRejected, events.RefundRejected{EventID: events.DerivedID(events.KindRefundRejected, rk),
		RefundID: rk, TransferID: tid, Reason: events.ReasonInsufficientFunds, OccurredAt: time.Now().UTC()})
	poll.True(t, 30*time.Second, "the other refund to be REJEITADO", func() bool { return readRefund(rejectedKey)["status"] == "REJEITADO" })
	if got := readRefund(rejectedKey); got["motivo"] != events.ReasonInsufficientFunds || got["valorEmCentavos"] != float64(5000) {
		t.Errorf("rejected refund reads %v", got)
	}
	dltReader := kafkago.NewReader(kafkago.ReaderConfig{Brokers: s.brokers, Topic: events.DLT(s.topics.RefundSettled), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer dltReader.Close()
	m, err := dltReader.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("read DLT: %v", err)
	}
	var dead events.RefundSettled
	if err := json.Unmarshal(m.Value, &dead); err != nil || dead.EventID != forged.EventID {
		t.Errorf("DLT record %s (%v), want the forged result", m.Value, err)
	}
	if g := kafkatest.Header(m, dlt.HeaderDLTOriginalTopic); g != s.topics.RefundSettled {
		t.Errorf("DLT original topic = %q", g)
	}
	got := s.status(t, id)
	if got["status"] != "LIQUIDADA" || got["valorEstornadoEmCentavos"] != float64(10000) {
		t.Errorf("the refunded transfer reads %v, want LIQUIDADA with 10000 refunded", got)
	}
	if got := readRefund(settledKey); got["status"] != "LIQUIDADO" || got["valorEmCentavos"] != float64(10000) {
		t.Errorf("settled refund reads %v", got)
	}
}
