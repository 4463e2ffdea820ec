package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RawProducer writes records exactly as given (the partition each names,
// the timestamp each carries), one at a time and each acknowledged before
// the next, inside Kafka transactions or outside them, as the reference
// design's transactional producers do. The suite's services never write
// this way (they publish through the outbox); the tests of read_committed
// consumers and of the tools that read by time do, and their clients are
// built here like every other, with the configuration's security settings.
type RawProducer struct {
	txn, plain *kgo.Client
}

// NewRawProducer returns a RawProducer whose transactions use
// transactionalID. Close it.
func NewRawProducer(cfg Config, transactionalID string) (*RawProducer, error) {
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka raw producer: %w", err)
	}
	base = append(base, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn, err := kgo.NewClient(append(base, kgo.TransactionalID(transactionalID), kgo.TransactionTimeout(time.Minute))...)
	if err != nil {
		return nil, fmt.Errorf("kafka transactional producer: %w", err)
	}
	plain, err := kgo.NewClient(base...)
	if err != nil {
		txn.Close()
		return nil, fmt.Errorf("kafka raw producer: %w", err)
	}
	return &RawProducer{txn: txn, plain: plain}, nil
}

// Begin opens a transaction.
func (p *RawProducer) Begin() error { return p.txn.BeginTransaction() }

// Produce writes recs in order, inside the open transaction when inTxn,
// and returns the first failure.
func (p *RawProducer) Produce(ctx context.Context, inTxn bool, recs ...Record) error {
	cl := p.plain
	if inTxn {
		cl = p.txn
	}
	for _, r := range recs {
		kr := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Time}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if err := cl.ProduceSync(ctx, kr).FirstErr(); err != nil {
			return fmt.Errorf("produce to %s: %w", r.Topic, err)
		}
	}
	return nil
}

// End commits the open transaction (its records become readable, a commit
// marker follows them) or aborts it (its records stay in the log behind an
// abort marker, never seen by a read_committed consumer).
func (p *RawProducer) End(ctx context.Context, commit bool) error {
	return p.txn.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// Close aborts a transaction still open and closes both clients.
func (p *RawProducer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.txn.AbortBufferedRecords(ctx)
	_ = p.txn.EndTransaction(ctx, kgo.TryAbort) // nothing to do when none is open
	p.txn.Close()
	p.plain.Close()
}
