package kafkatest

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

// Writer is the suite's producer (broker.NewProducer or NewDLTProducer),
// for tests that publish as the relays or the consumer loop do: it is a
// broker.Publisher, and WriteMessages publishes kafka-go messages that a
// test built to write a topic directly.
type Writer struct{ *broker.Producer }

// NewWriter returns a Writer on broker.NewProducer; the test fails when it
// cannot be built. The caller closes it.
func NewWriter(tb testing.TB, cfg broker.Config) *Writer {
	tb.Helper()
	p, err := broker.NewProducer(cfg)
	if err != nil {
		tb.Fatalf("kafka producer: %v", err)
	}
	return &Writer{p}
}

// NewDLTWriter returns a Writer on broker.NewDLTProducer, which keeps a
// record on the partition it names. The caller closes it.
func NewDLTWriter(tb testing.TB, cfg broker.Config) *Writer {
	tb.Helper()
	p, err := broker.NewDLTProducer(cfg)
	if err != nil {
		tb.Fatalf("kafka DLT producer: %v", err)
	}
	return &Writer{p}
}

// WriteMessages publishes msgs (topic, partition, key, value, headers) and
// returns Publish's error.
func (w *Writer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	recs := make([]broker.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = Record(m)
	}
	return w.Publish(ctx, recs...)
}

// Record converts a kafka-go message a test read or built to the suite's
// record.
func Record(m kafka.Message) broker.Record {
	r := broker.Record{Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset, //nolint:gosec // a partition number
		Key: m.Key, Value: m.Value, Time: m.Time}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, broker.Header{Key: h.Key, Value: h.Value})
	}
	return r
}

// Header returns the value of the last header of m named key, or "".
func Header[M kafka.Message | broker.Record](m M, key string) string {
	switch v := any(m).(type) {
	case kafka.Message:
		return Record(v).Header(key)
	case broker.Record:
		return v.Header(key)
	}
	return ""
}

// Message converts a suite's record to a kafka-go message, for a test that
// writes it to a topic directly (TxnProducer).
func Message(r broker.Record) kafka.Message {
	m := kafka.Message{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Key: r.Key, Value: r.Value, Time: r.Time}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return m
}
