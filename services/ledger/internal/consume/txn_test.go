package consume_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestTransactionalAntifraud: the reference design's antifraud writes each
// TransferenciaAnalisada in a Kafka transaction. An aborted one moves no
// money; a committed one, interleaved with a plain record, settles once;
// one behind an open transaction waits for it; no transaction marker
// reaches the DLT.
func TestTransactionalAntifraud(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.open(t, "A", 1_000)
			e.open(t, "B", 0)
			prod := kafkatest.NewProducer(t)
			msg := func(id uuid.UUID, cents int64) kafkago.Message {
				m := analysed(t, id, "A", "B", cents)
				m.Topic = e.topic
				return kafkatest.Message(m)
			}
			aborted, committed, plain, open, after := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()

			prod.Begin()
			prod.InTxn(msg(aborted, 400))
			prod.Abort()
			prod.Begin()
			prod.InTxn(msg(committed, 300))
			prod.Plain(msg(plain, 100))
			prod.Commit()
			e.run(t, consumer.BlockingRetries, batch)
			e.waitResult(t, committed, "LIQUIDADA")
			e.waitResult(t, plain, "LIQUIDADA")

			prod.Begin()
			prod.InTxn(msg(open, 200))
			prod.Plain(msg(after, 50))
			poll.Never(t, 2*time.Second, "a transfer behind the open transaction settled", func() (bool, string) {
				r := e.result(t, after) + e.result(t, open)
				return r != "", r
			})
			prod.Commit()
			e.waitResult(t, open, "LIQUIDADA")
			e.waitResult(t, after, "LIQUIDADA")
			poll.Until(t, 60*time.Second, "the group commits past the last marker", func() (bool, string) {
				o := kafkatest.GroupOffsets(t, e.group, e.topic, 0)
				return o.Committed == o.End, fmt.Sprintf("%+v", o)
			})

			if got := e.result(t, aborted); got != "" {
				t.Errorf("the aborted transfer has result %q, want none", got)
			}
			bal := map[string]int64{}
			for _, a := range ledgertest.ReadState(t, e.db).Accounts {
				bal[a.ID] = a.Balance
			}
			if diff := cmp.Diff(map[string]int64{"A": 350, "B": 650, "__FUNDING__BRL": -1000}, bal); diff != "" {
				t.Errorf("balances (-want +got):\n%s", diff)
			}
			if n := counter(t, e.reg, "ledger_settlements_total", map[string]string{"result": "LIQUIDADA", "reason": ""}); n != 4 {
				t.Errorf("ledger_settlements_total{LIQUIDADA} = %v, want 4 (each once)", n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dead, err := dlt.List(ctx, broker.Config{Brokers: e.brokers}, dlt.Filter{Topic: events.DLT(e.topic)})
			if err != nil {
				t.Fatal(err)
			}
			if len(dead) != 0 {
				t.Errorf("%d records dead-lettered, want none: %+v", len(dead), dead)
			}
			ledgertest.CheckInvariants(t, e.db)
		})
	}
}
