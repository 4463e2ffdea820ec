package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// hold is a TransferenciaAnalisada of a hold (captura MANUAL) of
// ledgertest.Client expiring at expires, signed by s's transfer key over
// signed (the claim of the record itself, unless a test forges it).
func (s *service) hold(t *testing.T, id uuid.UUID, src, dst string, cents int64, expires time.Time, signed transfersig.Claim) kafkago.Message {
	t.Helper()
	ev := events.Analysed{EventID: events.DerivedID("analisada", id), TransferID: id, SourceAccount: src, DestAccount: dst,
		AmountCents: cents, Currency: "BRL", RiskScore: 10, OccurredAt: time.Now().UTC(), ClientID: ledgertest.Client,
		Authorization: s.iss.TransferKey().Sign(signed), RequestEventID: requestOf(id),
		Capture: events.CaptureManual, ExpiresAt: expires}
	return record(t, src, id, events.TypeAnalysed, ev.EventID, ev)
}

// holdClaim is the claim the transfers service signs for a hold.
func holdClaim(id uuid.UUID, src, dst string, cents int64, expires time.Time) transfersig.Claim {
	return transfersig.Claim{TransferID: id, Source: src, Destination: dst, AmountCents: cents, Currency: "BRL",
		Client: ledgertest.Client, Hold: true, ExpiresAt: expires}
}

// captureCmd and cancelCmd are the transfers service's commands on the hold id
// of client.
func captureCmd(t *testing.T, id uuid.UUID, src, client string, cents int64) kafkago.Message {
	t.Helper()
	ev := events.CaptureRequested{EventID: uuid.New(), TransferID: id, SourceAccount: src, AmountCents: cents,
		ClientID: client, OccurredAt: time.Now().UTC()}
	return record(t, src, id, events.TypeCaptureRequested, ev.EventID, ev)
}

func cancelCmd(t *testing.T, id uuid.UUID, src, client string) kafkago.Message {
	t.Helper()
	ev := events.CancelRequested{EventID: uuid.New(), TransferID: id, SourceAccount: src, ClientID: client,
		OccurredAt: time.Now().UTC()}
	return record(t, src, id, events.TypeCancelRequested, ev.EventID, ev)
}

func record(t *testing.T, key string, id uuid.UUID, typ string, eventID uuid.UUID, payload any) kafkago.Message {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return kafkago.Message{Key: []byte(key), Value: b, Headers: []kafkago.Header{
		{Key: events.HeaderEventID, Value: []byte(eventID.String())},
		{Key: events.HeaderEventType, Value: []byte(typ)},
		{Key: events.HeaderCorrelationID, Value: []byte(id.String())},
	}}
}

func (s *service) produceTo(t *testing.T, topic string, ms ...kafkago.Message) {
	t.Helper()
	for i := range ms {
		ms[i].Topic = topic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.writer.WriteMessages(ctx, ms...); err != nil {
		t.Fatal(err)
	}
}

// account is GET /contas/{id}'s balance, reserved and available amounts.
func (s *service) account(t *testing.T, id string) []int64 {
	t.Helper()
	st, body := s.call(t, "GET", "/contas/"+id, "")
	if st != http.StatusOK {
		t.Fatalf("GET /contas/%s: %d %v", id, st, body)
	}
	n := func(k string) int64 { f, _ := body[k].(float64); return int64(f) }
	return []int64{n("saldoEmCentavos"), n("reservadoEmCentavos"), n("disponivelEmCentavos")}
}

// TestCaptureBeforeItsReservationWaitsForIt: a capture the ledger reads
// before it holds the reservation (a failover lost the reservation's
// commit after its event was published, and the request is redelivered)
// is retried in place, not dead-lettered, and captures the hold once the
// redelivered request has reserved it.
func TestCaptureBeforeItsReservationWaitsForIt(t *testing.T) {
	t.Parallel()
	// Retries over about 10 s, as BlockingRetries' 15.5 s outlast a
	// failover's redelivery.
	s := startWithPolicy(t, nil, consumer.Blocking{Backoff: backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: time.Second}, Retries: 12})
	s.openAccount(t, "CC-001", 10_000)
	s.openAccount(t, "CC-002", 0)
	id := uuid.New()
	later := time.Now().Add(time.Hour).UTC()
	s.produceTo(t, s.topics.CaptureRequested, captureCmd(t, id, "CC-001", ledgertest.Client, 4_000))
	retried := regexp.MustCompile(`consumer_retries_total\{attempt="1",group="ledger-comandos[^"]*"\} 1`)
	poll.True(t, 60*time.Second, "the capture retried", func() bool { return retried.MatchString(s.metrics(t)) })
	s.produce(t, s.hold(t, id, "CC-001", "CC-002", 6_000, later, holdClaim(id, "CC-001", "CC-002", 6_000, later)))

	var st events.Settled
	if err := events.Decode(s.read(t, s.topics.Settled, 1)[0].Value, &st); err != nil {
		t.Fatal(err)
	}
	if st.TransferID != id || st.AmountCents != 4_000 {
		t.Errorf("TransferenciaLiquidada = %+v, want %s captured for 4000 cents", st, id)
	}
	poll.True(t, 30*time.Second, "balances after the capture", func() bool {
		return cmp.Equal(s.account(t, "CC-001"), []int64{6_000, 0, 6_000})
	})
	if m := s.metrics(t); strings.Contains(m, `ledger_dlt_messages_total{origin_topic="`+s.topics.CaptureRequested+`"}`) {
		t.Errorf("the early capture went to the DLT:\n%s", m)
	}
}

// TestHoldsThroughKafka runs every ending of a hold through the ledger
// as deployed, on the real broker and database: holds reserve; a partial
// capture settles the captured amount and publishes TransferenciaLiquidada
// with valorEmCentavos; a cancellation publishes TransferenciaCancelada
// CANCELADA_PELO_CLIENTE; the service's own expiry sweep (every 100 ms
// here) releases a hold past its expiraEm with EXPIRADA; a command for a
// transfer never reserved, and one of another client, go to their DLT
// without blocking the commands behind them; a command on a closed hold
// changes nothing; and a hold whose captura was changed after signing
// debits nothing.
func TestHoldsThroughKafka(t *testing.T) {
	t.Parallel()
	s := startWith(t, map[string]string{"LEDGER_EXPIRY_INTERVAL": "100ms"})
	s.openAccount(t, "CC-001", 100_000)
	s.openAccount(t, "CC-002", 0)
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	soon := time.Now().Add(3 * time.Second).UTC()
	captured, cancelled, expiring, kept, flipped := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	s.produce(t,
		s.hold(t, captured, "CC-001", "CC-002", 10_000, later, holdClaim(captured, "CC-001", "CC-002", 10_000, later)),
		s.hold(t, cancelled, "CC-001", "CC-002", 20_000, later, holdClaim(cancelled, "CC-001", "CC-002", 20_000, later)),
		s.hold(t, expiring, "CC-001", "CC-002", 30_000, soon, holdClaim(expiring, "CC-001", "CC-002", 30_000, soon)),
		s.hold(t, kept, "CC-001", "CC-002", 5_000, time.Time{}, holdClaim(kept, "CC-001", "CC-002", 5_000, time.Time{})),
		// Signed as an immediate transfer, sent as a hold.
		s.hold(t, flipped, "CC-001", "CC-002", 1_000, later, transfersig.Claim{TransferID: flipped, Source: "CC-001",
			Destination: "CC-002", AmountCents: 1_000, Currency: "BRL", Client: ledgertest.Client}),
	)

	reserved := map[uuid.UUID]events.Reserved{}
	for _, m := range s.read(t, s.topics.Reserved, 4) {
		var ev events.Reserved
		if err := events.Decode(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		reserved[ev.TransferID] = ev
	}
	for id, want := range map[uuid.UUID]int64{captured: 10_000, cancelled: 20_000, expiring: 30_000, kept: 5_000} {
		if got := reserved[id]; got.AmountCents != want || got.RequestEventID != requestOf(id) {
			t.Errorf("TransferenciaReservada of %s = %+v, want %d cents for request %s", id, got, want, requestOf(id))
		}
	}
	if got := reserved[captured].ExpiresAt; !got.Equal(later) {
		t.Errorf("expiraEm = %s, want the record's %s", got, later)
	}
	if got, want := reserved[kept].ExpiresAt, time.Now().Add(7*24*time.Hour); got.Before(want.Add(-time.Minute)) || got.After(want) {
		t.Errorf("a hold without expiraEm expires at %s, want 7 days from now", got)
	}
	rejected := s.read(t, s.topics.Rejected, 1)[0]
	var rej events.Rejected
	if err := events.Decode(rejected.Value, &rej); err != nil || rej.TransferID != flipped || rej.Reason != events.ReasonUnauthorizedSource {
		t.Errorf("the hold whose captura changed after signing: %+v (%v), want ORIGEM_NAO_AUTORIZADA", rej, err)
	}

	// A forged capture of a transfer never reserved stands before the real
	// one on the same partition (same key), and a cancellation by another
	// client before the real one: both go to their DLT, and the commands
	// behind them are applied.
	s.produceTo(t, s.topics.CaptureRequested,
		captureCmd(t, uuid.New(), "CC-001", ledgertest.Client, 1_000),
		captureCmd(t, captured, "CC-001", ledgertest.Client, 7_000))
	s.produceTo(t, s.topics.CancelRequested,
		cancelCmd(t, kept, "CC-001", "client-b"),
		cancelCmd(t, cancelled, "CC-001", ledgertest.Client))

	settled := s.read(t, s.topics.Settled, 1)[0]
	var st events.Settled
	if err := events.Decode(settled.Value, &st); err != nil {
		t.Fatal(err)
	}
	if st.TransferID != captured || st.AmountCents != 7_000 || st.RequestEventID != requestOf(captured) || string(settled.Key) != "CC-001" {
		t.Errorf("TransferenciaLiquidada = %+v key %s, want %s captured for 7000 cents, keyed CC-001", st, settled.Key, captured)
	}
	got := map[uuid.UUID]string{}
	for _, m := range s.read(t, s.topics.Cancelled, 2) {
		var ev events.Cancelled
		if err := events.Decode(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		got[ev.TransferID] = ev.Reason
	}
	if diff := cmp.Diff(map[uuid.UUID]string{cancelled: events.ReasonCancelledByClient, expiring: events.ReasonExpired}, got); diff != "" {
		t.Errorf("TransferenciaCancelada mismatch (-want +got):\n%s", diff)
	}
	for topic, cause := range map[string]string{
		s.topics.CaptureRequested: "no reservation",
		s.topics.CancelRequested:  "another client",
	} {
		dead := kafkatest.Record(s.read(t, events.DLT(topic), 1)[0])
		if o, _ := dlt.ClaimedOrigin(dead); o.Topic != topic || !strings.Contains(dlt.ExceptionMessage(dead), cause) {
			t.Errorf("DLT of %s: origin %q, cause %q; want the command refused with %q", topic, o.Topic, dlt.ExceptionMessage(dead), cause)
		}
		want := fmt.Sprintf(`ledger_dlt_messages_total{origin_topic=%q} 1`, topic)
		poll.True(t, 60*time.Second, want, func() bool { return strings.Contains(s.metrics(t), want) })
	}

	// A capture of the cancelled hold, and a second cancellation, find it
	// closed: nothing changes and nothing goes to a DLT.
	s.produceTo(t, s.topics.CaptureRequested, captureCmd(t, cancelled, "CC-001", ledgertest.Client, 1_000))
	s.produceTo(t, s.topics.CancelRequested, cancelCmd(t, cancelled, "CC-001", ledgertest.Client))
	poll.True(t, 60*time.Second, "both late commands handled", func() bool {
		return strings.Contains(s.metrics(t), `ledger_reservation_closings_total{result="ENCERRADA"} 2`)
	})
	for _, want := range []string{
		`ledger_reservation_closings_total{result="LIQUIDADA"} 1`,
		`ledger_reservation_closings_total{result="CANCELADA"} 1`,
		`ledger_reservation_closings_total{result="EXPIRADA"} 1`,
		`ledger_settlements_total{reason="",result="RESERVADA"} 4`,
	} {
		if m := s.metrics(t); !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if diff := cmp.Diff([][]int64{{93_000, 5_000, 88_000}, {7_000, 0, 7_000}},
		[][]int64{s.account(t, "CC-001"), s.account(t, "CC-002")}); diff != "" {
		t.Errorf("balances [saldo reservado disponivel] mismatch (-want +got):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, s.db)
}
