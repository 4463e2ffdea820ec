package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is a Publisher on franz-go's producer: idempotent (the broker
// drops a batch the client sends twice), acks from all in-sync replicas, up
// to five requests in flight per broker with the order of a partition kept
// across retries, and one produce request per broker for all the partitions
// it leads. A record that fails fails every record buffered after it on its
// partition: no later record of a key is acknowledged after an earlier one
// failed.
type Producer struct{ cl *kgo.Client }

// NewProducer returns a Producer partitioning by murmur2 of the key, as the
// Java client does. The caller closes it.
func NewProducer(cfg Config) (*Producer, error) {
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	cl, err := kgo.NewClient(append(base,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(cfg.maxMessageBytes())), //nolint:gosec // bounded by the broker's limits
		kgo.ProduceRequestTimeout(10*time.Second),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	return &Producer{cl: cl}, nil
}

// WriteMessages sends msgs and waits for each one's acknowledgement; it
// returns nil, or kafka.WriteErrors aligned with msgs.
func (p *Producer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Topic: m.Topic, Key: m.Key, Value: m.Value}
		if len(m.Headers) > 0 {
			r.Headers = make([]kgo.RecordHeader, len(m.Headers))
			for j, h := range m.Headers {
				r.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
		}
		recs[i] = r
	}
	// ProduceSync's results come in the order the records completed.
	var errs kafka.WriteErrors
	for _, r := range p.cl.ProduceSync(ctx, recs...) {
		if r.Err == nil {
			continue
		}
		if errs == nil {
			errs = make(kafka.WriteErrors, len(msgs))
		}
		for i := range recs {
			if recs[i] == r.Record {
				errs[i] = r.Err
				break
			}
		}
	}
	if errs != nil {
		return errs
	}
	return nil
}

// Close flushes nothing (every WriteMessages waited for its records) and
// closes the client.
func (p *Producer) Close() error {
	p.cl.Close()
	return nil
}
