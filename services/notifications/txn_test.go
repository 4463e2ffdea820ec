package notifications_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestTransactionalResults: results written in Kafka transactions (on both
// topics the service reads) are notified only once committed: an aborted
// transaction notifies nothing, a committed one interleaved with a plain
// record notifies each once, a record behind an open transaction waits for
// it; no marker reaches a retry topic or the DLT.
func TestTransactionalResults(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	prod := kafkatest.NewProducer(t)
	msg := func(e event) kafka.Message {
		m := kafka.Message{Topic: e.Topic, Key: []byte(e.Key), Value: e.payload()}
		for k, v := range e.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		return m
	}
	abortedS, abortedR := h.settled("CC-TX"), h.rejected("CC-TX", events.ReasonInsufficientFunds)
	committedS, committedR := h.settled("CC-TX"), h.rejected("CC-TX", events.ReasonAccountNotFound)
	plain := h.settled("CC-TX")
	open, after := h.settled("CC-TX"), h.settled("CC-TX")

	prod.Begin()
	prod.InTxn(msg(abortedS), msg(abortedR))
	prod.Abort()
	prod.Begin()
	prod.InTxn(msg(committedS))
	prod.Plain(msg(plain))
	prod.InTxn(msg(committedR))
	prod.Commit()
	h.waitRequests(committedR.ID.String(), 1, 30*time.Second)
	h.waitRequests(plain.ID.String(), 1, 30*time.Second)
	prod.Begin()
	prod.InTxn(msg(open))
	prod.Plain(msg(after))
	poll.Never(t, 2*time.Second, "a record behind the open transaction notified", func() (bool, string) {
		n := len(h.recv.of(open.ID.String())) + len(h.recv.of(after.ID.String()))
		return n > 0, fmt.Sprintf("%d webhooks", n)
	})
	prod.Commit()
	h.waitRequests(after.ID.String(), 1, 30*time.Second)
	for _, topic := range []string{h.topics.Settled, h.topics.Rejected} {
		poll.Until(t, 60*time.Second, "the group commits past the last marker of "+topic, func() (bool, string) {
			o := kafkatest.GroupOffsets(t, h.cfg.Group, topic, 0)
			return o.Committed == o.End, fmt.Sprintf("%+v", o)
		})
	}

	var settledOrder []string
	for _, q := range h.recv.all() {
		if q.EventID != committedR.ID.String() {
			settledOrder = append(settledOrder, q.EventID)
		}
	}
	want := []string{committedS.ID.String(), plain.ID.String(), open.ID.String(), after.ID.String()}
	if diff := cmp.Diff(want, settledOrder); diff != "" {
		t.Errorf("webhooks for the settled topic, in order (-want +got):\n%s", diff)
	}
	if n := len(h.recv.of(committedR.ID.String())); n != 1 {
		t.Errorf("%d webhooks for the committed rejection, want 1", n)
	}
	var derived []string
	for _, main := range []string{h.topics.Settled, h.topics.Rejected} {
		for _, d := range broker.RetryDelays {
			derived = append(derived, broker.RetryTopic(main, d))
		}
		derived = append(derived, events.DLT(main))
	}
	for _, topic := range derived {
		if recs := h.list(topic); len(recs) != 0 {
			t.Errorf("%s holds %d records, want none", topic, len(recs))
		}
	}
}
