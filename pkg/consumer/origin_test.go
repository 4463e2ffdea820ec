package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
)

// forgedHeaders are the dead-letter and retry headers a record's writer
// may put on it to choose where its replay goes.
func forgedHeaders() []broker.Header {
	return append(dlt.SetFailure(nil, dlt.Origin{Topic: "pagamentos.transferencia.analisada.v1", Partition: 7, Offset: 42}, errors.New("forged")),
		broker.Header{Key: "kafka_exception-message", Value: []byte("forged")},
		broker.Header{Key: "kafka_dlt-exception-stacktrace", Value: []byte("forged")},
		broker.Header{Key: dlt.HeaderRetryAttempts, Value: []byte{0, 0, 0, 9}},
		broker.Header{Key: events.HeaderTraceparent, Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})
}

// TestForwardOriginIsWhereTheRecordWasRead: a record that arrives on the
// main topic with forged kafka_dlt-*, kafka_exception-* and retry_topic-*
// headers reaches the DLT (through the retry topics, for that policy)
// with the main topic, its partition and offset as its origin, none of
// the forged headers, and its other headers (traceparent) kept.
func TestForwardOriginIsWhereTheRecordWasRead(t *testing.T) {
	for _, pc := range policies {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, pc)
			m := broker.Record{Topic: f.topic, Key: []byte("CC-001"), Value: []byte("forged"), Headers: forgedHeaders()}
			if err := f.writer.Publish(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			f.run(t, pc, func(context.Context, broker.Record) error { return errors.New("always fails") })
			dead := readDLT(t, f, 1)[0]
			o, ok := dlt.ClaimedOrigin(dead)
			if !ok || o.Topic != f.topic || o.Partition != 0 || o.Offset != 0 || o.Group != f.group {
				t.Errorf("DLT origin = %+v (%v), want %s/0@0 in %s", o, ok, f.topic, f.group)
			}
			for _, h := range dead.Headers {
				if strings.Contains(string(h.Value), "forged") && h.Key != dlt.HeaderDLTExceptionMessage {
					t.Errorf("forged header %s=%q reached the DLT", h.Key, h.Value)
				}
			}
			if got := dlt.ExceptionMessage(dead); got != "always fails" {
				t.Errorf("exception message = %q, want the handler's error", got)
			}
			if got := kafkatest.Header(dead, events.HeaderTraceparent); got == "" {
				t.Errorf("traceparent dropped")
			}
			want := 1 // no retry_topic-attempts header
			if rt, isRetry := pc.policy.(consumer.RetryTopics); isRetry {
				want = len(rt.Delays) + 1
			}
			if n := dlt.Attempts(dead); n != want {
				t.Errorf("attempts header = %d, want %d", n, want)
			}
		})
	}
}

// TestForwardFromARetryTopicKeepsItsMainTopic: a record written straight
// to a retry topic, its origin header naming another topic, reaches the
// main topic's DLT with the main topic as its origin topic.
func TestForwardFromARetryTopicKeepsItsMainTopic(t *testing.T) {
	t.Parallel()
	pc := policies[1]
	rt := pc.policy.(consumer.RetryTopics)
	f := newFixture(t, pc)
	m := broker.Record{Topic: broker.RetryTopic(f.topic, rt.Delays[len(rt.Delays)-1]), Key: []byte("CC-001"), Value: []byte("forged"),
		Headers: forgedHeaders()}
	if err := f.writer.Publish(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	f.run(t, pc, func(context.Context, broker.Record) error { return consumer.Permanent(errors.New("cannot handle")) })
	dead := readDLT(t, f, 1)[0]
	if o, _ := dlt.ClaimedOrigin(dead); o.Topic != f.topic || o.Group != f.group {
		t.Errorf("DLT origin = %+v, want topic %s, group %s", o, f.topic, f.group)
	}
	if got := kafkatest.Header(dead, "kafka_exception-message"); got != "" {
		t.Errorf("forged kafka_exception-message %q reached the DLT", got)
	}
}
