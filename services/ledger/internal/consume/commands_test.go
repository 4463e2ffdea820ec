package consume_test

import (
	"context"
	"encoding/json"
	"strconv"
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

// reserve reserves a hold of cents from src to dst for ledgertest.Client
// through svc, as the settlement consumer does, and returns its id.
func reserve(t *testing.T, svc *ledger.Service, src, dst string, cents int64) uuid.UUID {
	t.Helper()
	id := uuid.New()
	tr := ledger.Transfer{ID: id, EventID: uuid.New(), Source: src, Dest: dst, AmountCents: cents, Currency: "BRL",
		ClientID: ledgertest.Client, Hold: true}
	tr.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: id, Source: src, Destination: dst, AmountCents: cents,
		Currency: "BRL", Client: ledgertest.Client, Hold: true})
	rs, err := svc.Settle(context.Background(), []ledger.Transfer{tr})
	if err != nil || rs[0].Outcome != ledger.Reserved {
		t.Fatalf("reserve %d cents: %+v, %v", cents, rs, err)
	}
	return id
}

// captureRecord is a CapturaSolicitada of ledgertest.Client.
func captureRecord(t *testing.T, id uuid.UUID, src string, cents int64) broker.Record {
	t.Helper()
	ev := events.CaptureRequested{EventID: uuid.New(), TransferID: id, SourceAccount: src, AmountCents: cents,
		ClientID: ledgertest.Client, OccurredAt: time.Now().UTC()}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Record{Key: []byte(src), Value: b, Headers: []broker.Header{
		{Key: events.HeaderEventID, Value: []byte(ev.EventID.String())},
		{Key: events.HeaderEventType, Value: []byte(events.TypeCaptureRequested)},
	}}
}

// TestCommandBatchWithRefusedCommands: in one batch of captures, a
// capture above the reserved amount goes to the DLT at once, a capture
// of a transfer never reserved goes there after the policy's retries
// (the ledger may be behind its reservation), a capture of a closed hold
// changes nothing, and every other capture is applied exactly once, in
// order.
func TestCommandBatchWithRefusedCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "A", 1_000)
	e.open(t, "B", 0)
	topics := ledgertest.Topics
	topics.CaptureRequested = kafkatest.Topic(t, "ledger-captura", 1)
	topics.CancelRequested = kafkatest.Topic(t, "ledger-cancelamento", 1)
	e.topic = topics.CaptureRequested
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: e.brokers},
		[]broker.TopicSpec{{Name: events.DLT(e.topic), Partitions: 1, ReplicationFactor: 1}}); err != nil {
		t.Fatalf("create DLT topic: %v", err)
	}
	svc := ledger.NewService(e.store, ledger.Rules{Topics: topics, Keys: ledgertest.TransferKeys}, nil)
	first, second, third := reserve(t, svc, "A", "B", 100), reserve(t, svc, "A", "B", 200), reserve(t, svc, "A", "B", 300)

	e.produce(t,
		captureRecord(t, first, "A", 60),
		captureRecord(t, uuid.New(), "A", 10), // never reserved
		captureRecord(t, second, "A", 201),    // above the reservation
		captureRecord(t, second, "A", 150),
		captureRecord(t, first, "A", 40), // first is closed by then
		captureRecord(t, third, "A", 300),
	)
	h := consume.NewCommands(svc, topics, e.logger(), e.metrics)
	policy := consumer.Blocking{Backoff: backoff.Exponential{Initial: 200 * time.Millisecond, Multiplier: 2, Max: time.Second}, Retries: 3}
	group := kafkatest.Group(t, "ledger-comandos")
	e.start(t, consumer.Config{Broker: broker.Config{Brokers: e.brokers}, Group: group,
		Topics: []string{topics.CaptureRequested, topics.CancelRequested}, Handler: h.Handle, MaxBatch: 50, Policy: policy,
		Publisher: e.writer, Logger: e.logger(), Metrics: consumer.NewMetrics(e.reg)})

	dead := e.readDLT(t, 2)
	poll.True(t, 60*time.Second, "the last capture applied", func() bool {
		return counter(t, e.reg, "ledger_reservation_closings_total", map[string]string{"result": "LIQUIDADA"}) == 3
	})
	// The never-reserved capture's 3 retries, and no other.
	for attempt := range 4 {
		want := 1.0
		if attempt == 3 {
			want = 0
		}
		if n := counter(t, e.reg, "consumer_retries_total", map[string]string{"group": group, "attempt": strconv.Itoa(attempt + 1)}); n != want {
			t.Errorf("retries at attempt %d = %v, want %v", attempt+1, n, want)
		}
	}
	for i, want := range []struct {
		offset int64
		cause  string
	}{{1, "no reservation"}, {2, "up to the reserved amount"}} {
		if o, _ := dlt.ClaimedOrigin(dead[i]); o.Offset != want.offset || !strings.Contains(dlt.ExceptionMessage(dead[i]), want.cause) {
			t.Errorf("DLT record %d from offset %d with cause %q, want offset %d and %q", i, o.Offset, dlt.ExceptionMessage(dead[i]),
				want.offset, want.cause)
		}
	}
	if n := counter(t, e.reg, "ledger_reservation_closings_total", map[string]string{"result": "ENCERRADA"}); n != 1 {
		t.Errorf("commands on a closed hold = %v, want 1", n)
	}
	e.checkBalances(t, map[string]int64{"A": 490, "B": 510, "__FUNDING__BRL": -1000})
	// With every hold closed, no account has anything reserved.
	ledgertest.CheckInvariants(t, e.db)
}

// A record from a topic that carries no command is poison.
func TestCommandFromAnotherTopicIsPoison(t *testing.T) {
	t.Parallel()
	h := consume.NewCommands(nil, ledgertest.Topics, nil, nil)
	_, err := h.Decode(broker.Record{Topic: ledgertest.Topics.Analysed, Value: []byte(`{}`)})
	if !consumer.IsPermanent(err) {
		t.Errorf("Decode of an analisada record = %v, want a permanent error", err)
	}
}
