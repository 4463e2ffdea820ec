package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/poll"
)

// refundCmd is the transfers service's EstornoSolicitado of refund id of
// cents of transfer tr (CC-001 to CC-002), asked by ledgertest.Client and
// signed with key.
func refundCmd(t *testing.T, key transfersig.Signer, id, tr uuid.UUID, cents int64) kafkago.Message {
	t.Helper()
	ev := events.RefundRequested{EventID: uuid.New(), RefundID: id, TransferID: tr, SourceAccount: "CC-001", DestAccount: "CC-002",
		AmountCents: cents, Currency: "BRL", ClientID: ledgertest.Client, OccurredAt: time.Now().UTC(),
		Authorization: key.SignRefund(transfersig.RefundClaim{RefundID: id, TransferID: tr, Source: "CC-001",
			Destination: "CC-002", AmountCents: cents, Currency: "BRL", Client: ledgertest.Client})}
	return record(t, "CC-001", tr, events.TypeRefundRequested, ev.EventID, ev)
}

// TestRefundsThroughKafka runs refunds through the ledger as deployed
// (its own group, topics, outbox relay and DLT monitor), on the real
// broker and database: a partial refund is published as EstornoLiquidado
// and moves the money back; one signed by a key the ledger does not trust
// is EstornoRejeitado ORIGEM_NAO_AUTORIZADA; a malformed record goes to
// estorno.solicitado's DLT, where the DLT monitor counts it.
func TestRefundsThroughKafka(t *testing.T) {
	t.Parallel()
	s := startWith(t, nil)
	s.openAccount(t, "CC-001", 10_000)
	s.openAccount(t, "CC-002", 0)
	tr := uuid.New()
	s.produce(t, s.analysed(t, tr, "CC-001", "CC-002", 6_000))
	s.read(t, s.topics.Settled, 1)

	settled, forged := uuid.New(), uuid.New()
	s.produceTo(t, s.topics.RefundRequested,
		refundCmd(t, s.iss.TransferKey(), settled, tr, 2_500),
		kafkago.Message{Key: []byte("CC-001"), Value: []byte(`{"estornoId": 7}`)},
		refundCmd(t, ledgertest.TransferKey, forged, tr, 1_000),
	)
	var ok events.RefundSettled
	m := s.read(t, s.topics.RefundSettled, 1)[0]
	if err := events.Decode(m.Value, &ok); err != nil || ok.RefundID != settled || ok.TransferID != tr || ok.AmountCents != 2_500 ||
		ok.EventID != events.DerivedID(events.KindRefundSettled, settled) || string(m.Key) != "CC-001" {
		t.Errorf("EstornoLiquidado = %+v (key %s), %v", ok, m.Key, err)
	}
	var no events.RefundRejected
	m = s.read(t, s.topics.RefundRejected, 1)[0]
	if err := events.Decode(m.Value, &no); err != nil || no.RefundID != forged || no.Reason != events.ReasonUnauthorizedSource ||
		no.EventID != events.DerivedID(events.KindRefundRejected, forged) {
		t.Errorf("EstornoRejeitado = %+v, %v", no, err)
	}
	if got := []int64{s.balance(t, "CC-001"), s.balance(t, "CC-002")}; got[0] != 6_500 || got[1] != 3_500 {
		t.Errorf("balances after the refund: %v, want [6500 3500]", got)
	}
	dead := `ledger_dlt_messages_total{origin_topic="` + s.topics.RefundRequested + `"} 1`
	poll.True(t, 60*time.Second, "the malformed refund counted on its DLT", func() bool { return strings.Contains(s.metrics(t), dead) })
	metrics := s.metrics(t)
	for _, want := range []string{`ledger_refunds_total{reason="",result="LIQUIDADO"} 1`,
		`ledger_refunds_total{reason="ORIGEM_NAO_AUTORIZADA",result="REJEITADO"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
