package antifraud_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestTransactionalRequests: requests written in Kafka transactions are
// analysed only once committed: an aborted one never, a committed one
// (interleaved with a plain one) once, one behind an open transaction only
// after it commits; no transaction marker reaches the DLT.
func TestTransactionalRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	h.start(risk.DefaultConfig())
	prod := kafkatest.NewProducer(t)
	msg := func(req events.Requested) kafka.Message {
		payload, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Topic: h.topics.Requested, Key: []byte(req.SourceAccount), Value: payload, Headers: []kafka.Header{
			{Key: events.HeaderEventID, Value: []byte(req.EventID.String())},
			{Key: events.HeaderEventType, Value: []byte(events.TypeRequested)},
		}}
	}
	aborted, committed, plain := request("CC-001", 100), request("CC-001", 200), request("CC-001", 300)
	open, after := request("CC-001", 400), request("CC-001", 500)

	prod.Begin()
	prod.InTxn(msg(aborted))
	prod.Abort()
	prod.Begin()
	prod.InTxn(msg(committed))
	prod.Plain(msg(plain))
	prod.Commit()
	poll.Until(t, 60*time.Second, "two decisions", func() (bool, string) {
		n := len(h.decisions())
		return n == 2, fmt.Sprintf("%d decisions", n)
	})
	prod.Begin()
	prod.InTxn(msg(open))
	prod.Plain(msg(after))
	poll.Never(t, 2*time.Second, "a request behind the open transaction analysed", func() (bool, string) {
		n := len(h.decisions())
		return n != 2, fmt.Sprintf("%d decisions", n)
	})
	prod.Commit()
	poll.Until(t, 60*time.Second, "the group commits past the last marker", func() (bool, string) {
		o := kafkatest.GroupOffsets(t, h.group, h.topics.Requested, 0)
		return o.Committed == o.End, fmt.Sprintf("%+v", o)
	})

	var decided []uuid.UUID
	for id := range h.decisions() {
		decided = append(decided, id)
	}
	want := []uuid.UUID{committed.TransferID, plain.TransferID, open.TransferID, after.TransferID}
	less := func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(want, less)
	slices.SortFunc(decided, less)
	if diff := cmp.Diff(want, decided); diff != "" {
		t.Errorf("transfers decided (-want +got):\n%s", diff)
	}
	poll.Until(t, 60*time.Second, "four results published", func() (bool, string) {
		n := len(h.list(h.topics.Analysed))
		return n == 4, fmt.Sprintf("%d", n)
	})
	var order []uuid.UUID
	for _, r := range h.list(h.topics.Analysed) {
		var ev events.Analysed
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		order = append(order, ev.TransferID)
	}
	if diff := cmp.Diff([]uuid.UUID{committed.TransferID, plain.TransferID, open.TransferID, after.TransferID}, order); diff != "" {
		t.Errorf("results in order (-want +got):\n%s", diff)
	}
	if dead := h.list(events.DLT(h.topics.Requested)); len(dead) != 0 {
		t.Errorf("%d records dead-lettered, want none", len(dead))
	}
}
