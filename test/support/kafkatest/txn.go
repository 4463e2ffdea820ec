package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

// Producer writes records as the reference design's transactional
// producers do (the seed's antifraud writes each decision in a Kafka
// transaction), and also outside any transaction, so tests can interleave
// both on one partition. Each record goes to the partition its message
// names (kafka.Message.Partition, 0 by default); every call waits for the
// broker's acknowledgement, so calls land in the log in call order.
type Producer struct {
	tb testing.TB
	p  *broker.RawProducer
}

// NewProducer returns a Producer with a transactional id of its own on the
// given brokers, by default the shared real broker ([Brokers]; [Fake]
// addresses work too). It closes when the test ends; a transaction still
// open then is aborted.
func NewProducer(tb testing.TB, brokers ...string) *Producer {
	tb.Helper()
	if len(brokers) == 0 {
		brokers = Brokers(tb)
	}
	p, err := broker.NewRawProducer(broker.Config{Brokers: brokers}, uniqueName("txn", 100))
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	tb.Cleanup(p.Close)
	return &Producer{tb: tb, p: p}
}

// Begin opens a transaction.
func (p *Producer) Begin() {
	p.tb.Helper()
	if err := p.p.Begin(); err != nil {
		p.tb.Fatalf("kafkatest: begin transaction: %v", err)
	}
}

// InTxn writes ms inside the open transaction.
func (p *Producer) InTxn(ms ...kafka.Message) {
	p.tb.Helper()
	p.produce(true, ms)
}

// Commit commits the open transaction: its records become readable and a
// commit marker follows them.
func (p *Producer) Commit() {
	p.tb.Helper()
	p.end(true)
}

// Abort aborts the open transaction: its records stay in the log, followed
// by an abort marker, and a read_committed consumer never sees them.
func (p *Producer) Abort() {
	p.tb.Helper()
	p.end(false)
}

// Committed writes ms in a transaction of their own and commits it.
func (p *Producer) Committed(ms ...kafka.Message) {
	p.tb.Helper()
	p.Begin()
	p.InTxn(ms...)
	p.Commit()
}

// Aborted writes ms in a transaction of their own and aborts it.
func (p *Producer) Aborted(ms ...kafka.Message) {
	p.tb.Helper()
	p.Begin()
	p.InTxn(ms...)
	p.Abort()
}

func (p *Producer) end(commit bool) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.p.End(ctx, commit); err != nil {
		p.tb.Fatalf("kafkatest: end transaction (commit %v): %v", commit, err)
	}
}

// Plain writes ms outside any transaction.
func (p *Producer) Plain(ms ...kafka.Message) {
	p.tb.Helper()
	p.produce(false, ms)
}

// produce writes ms, each to the partition it names, with its Time (when
// set) as the record's timestamp.
func (p *Producer) produce(inTxn bool, ms []kafka.Message) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]broker.Record, len(ms))
	for i, m := range ms {
		recs[i] = broker.Record{Topic: m.Topic, Partition: int32(m.Partition), Key: m.Key, Value: m.Value, Time: m.Time} //nolint:gosec // test partitions are small
		for _, h := range m.Headers {
			recs[i].Headers = append(recs[i].Headers, broker.Header{Key: h.Key, Value: h.Value})
		}
	}
	if err := p.p.Produce(ctx, inTxn, recs...); err != nil {
		p.tb.Fatalf("kafkatest: %v", err)
	}
}

// Offsets reports where a consumer group stands on one partition.
type Offsets struct {
	// Committed is the group's committed offset (-1: none).
	Committed int64
	// End is the partition's high watermark: one past its last record or
	// transaction marker.
	End int64
}

// GroupOffsets returns the committed offset of group on topic's partition
// and that partition's end. A read_committed consumer that commits past
// transaction markers reaches Committed == End once the partition holds no
// open transaction and everything was handled.
func GroupOffsets(tb testing.TB, group, topic string, partition int32) Offsets {
	tb.Helper()
	adm, err := broker.NewAdminClient(broker.Config{Brokers: Brokers(tb)})
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := Offsets{Committed: -1}
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		tb.Fatalf("kafkatest: committed offsets of %s: %v", group, err)
	}
	if c, ok := committed.Lookup(topic, partition); ok && c.Err == nil {
		out.Committed = c.At
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		tb.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	if e, ok := ends.Lookup(topic, partition); ok {
		out.End = e.Offset
	}
	return out
}
