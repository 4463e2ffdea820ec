package transfers_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestProjectionReadsCommitted: results written in Kafka transactions move
// a transfer only once committed: an aborted TransferenciaLiquidada leaves
// it PENDENTE, a committed one interleaved with a plain one settles both,
// one behind an open transaction waits for it; no marker reaches the DLT.
func TestProjectionReadsCommitted(t *testing.T) {
	t.Parallel()
	s := start(t)
	ids := map[string]string{}
	for i, name := range []string{"aborted", "committed", "plain", "open", "after"} {
		ids[name] = uuid.NewString()
		s.post(t, ids[name], body("CC-001", "CC-002", int64(100+i)), nil)
	}
	prod := kafkatest.NewProducer(t)
	settled := func(name string) kafkago.Message {
		b, err := json.Marshal(events.Settled{EventID: events.DerivedID(events.KindSettled, uuid.MustParse(ids[name])), TransferID: uuid.MustParse(ids[name]), OccurredAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		return kafkago.Message{Topic: s.topics.Settled, Key: []byte("CC-001"), Value: b,
			Headers: []kafkago.Header{{Key: events.HeaderEventType, Value: []byte(events.TypeSettled)}}}
	}
	statusOf := func(name string) string { return fmt.Sprint(s.status(t, ids[name])["status"]) }

	prod.Begin()
	prod.InTxn(settled("aborted"))
	prod.Abort()
	prod.Begin()
	prod.InTxn(settled("committed"))
	prod.Plain(settled("plain"))
	prod.Commit()
	poll.True(t, 30*time.Second, "committed and plain LIQUIDADA", func() bool {
		return statusOf("committed") == "LIQUIDADA" && statusOf("plain") == "LIQUIDADA"
	})
	prod.Begin()
	prod.InTxn(settled("open"))
	prod.Plain(settled("after"))
	poll.Never(t, 2*time.Second, "a transfer behind the open transaction projected", func() (bool, string) {
		st := statusOf("open") + "/" + statusOf("after")
		return st != "PENDENTE/PENDENTE", st
	})
	prod.Commit()
	poll.True(t, 30*time.Second, "open and after LIQUIDADA", func() bool {
		return statusOf("open") == "LIQUIDADA" && statusOf("after") == "LIQUIDADA"
	})
	poll.Until(t, 60*time.Second, "the group commits past the last marker", func() (bool, string) {
		o := kafkatest.GroupOffsets(t, s.group, s.topics.Settled, 0)
		return o.Committed == o.End, fmt.Sprintf("%+v", o)
	})
	if st := statusOf("aborted"); st != "PENDENTE" {
		t.Errorf("the transfer settled in an aborted transaction is %s, want PENDENTE", st)
	}
	ctx := t.Context()
	dead, err := dlt.List(ctx, broker.Config{Brokers: s.brokers}, dlt.Filter{Topic: events.DLT(s.topics.Settled)})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 0 {
		t.Errorf("%d records dead-lettered, want none", len(dead))
	}
}
