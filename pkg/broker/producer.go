package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is the Publisher every producer of the suite uses, on franz-go's
// producer:
//   - idempotent: the broker drops a batch the client sends again after a
//     lost answer, so a retry inside the client never duplicates a record;
//   - acks from all in-sync replicas;
//   - the order of a partition kept across retries (up to five requests in
//     flight per broker, sequence numbers checked by the broker), and
//     gapless: when a record fails, every record buffered after it on its
//     partition fails too, so no later record of a key is acknowledged
//     after an earlier one failed (the outbox's per-key order rests on it);
//   - one produce request per broker for all the partitions it leads, which
//     is what makes it faster than kafka-go's Writer, which sends one
//     request per partition (BenchmarkProducerChoice);
//   - a 2 ms linger, and none for a Publish call, which sends at once what
//     it buffered;
//   - no topic auto-creation: topics are provisioned with their settings.
//
// Records are partitioned by murmur2 of the key as the Java client does, so
// Go and Java producers put an account's events on the same partition;
// NewDLTProducer's keep the partition they name.
type Producer struct{ cl *kgo.Client }

// DeliveryTimeout is how long the producer keeps trying to send a record
// (a new leader, a broker back) before it fails: about as long as a leader
// election takes, well below the 15 s every caller gives a Publish.
const DeliveryTimeout = 2 * time.Second

// NewProducer returns the producer of the outbox relays. The caller closes
// it.
func NewProducer(cfg Config) (*Producer, error) {
	return newProducer(cfg, kgo.StickyKeyPartitioner(nil))
}

// NewDLTProducer returns the producer of dead-letter and retry records:
// each goes to the partition its Record names (the original record's, as
// Spring's DeadLetterPublishingRecoverer does) when the target topic has
// that partition, and by murmur2 of its key otherwise. The caller closes it.
func NewDLTProducer(cfg Config) (*Producer, error) {
	return newProducer(cfg, samePartition{})
}

func newProducer(cfg Config, partitioner kgo.Partitioner) (*Producer, error) {
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	cl, err := kgo.NewClient(append(base,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(partitioner),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(cfg.maxMessageBytes())), //nolint:gosec // bounded by the broker's limits
		kgo.ProduceRequestTimeout(10*time.Second),
		// A record not sent within DeliveryTimeout fails with
		// ErrRecordTimeout wrapping the last error that held it back, so
		// that a wrong password or a missing ACL surfaces as itself, and an
		// unreachable broker is counted as a failed send within seconds
		// (outbox_send_failures_total, the OutboxBrokerUnreachable alert)
		// rather than at the caller's deadline.
		kgo.RecordDeliveryTimeout(DeliveryTimeout),
		// A record whose request went out and got no answer (the broker
		// died, the connection broke) fails at that timeout or the
		// caller's deadline too, instead of holding Publish until the
		// broker is back: the relay's lease needs every call bounded
		// (no send after its lease ends). Such a record may have been
		// written; the relay's next send of it is then a second copy,
		// which consumers drop by event id. The client's own retries stay
		// deduplicated by the broker.
		kgo.AllowIdempotentProduceCancellation(),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	return &Producer{cl: cl}, nil
}

// Publish sends recs and waits for each one's acknowledgement; it returns
// nil, or PublishErrors aligned with recs. A record not acknowledged when
// ctx ends, or DeliveryTimeout after it could not be sent, fails; one that
// was in flight then may still have been written.
func (p *Producer) Publish(ctx context.Context, recs ...Record) error {
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
		if len(r.Headers) > 0 {
			kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
			for j, h := range r.Headers {
				kr.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
		}
		krs[i] = kr
	}
	// ProduceSync's results come in the order the records completed.
	var errs PublishErrors
	for _, res := range p.cl.ProduceSync(ctx, krs...) {
		if res.Err == nil {
			continue
		}
		if errs == nil {
			errs = make(PublishErrors, len(recs))
		}
		errs[slices.Index(krs, res.Record)] = sendError{res.Err}
	}
	if errs != nil {
		return errs
	}
	return nil
}

// Ping makes one round trip to a broker over the producer's connections (no
// new login), as the readiness probe does every second. A wrong password or
// an untrusted certificate fails it as it fails a Publish.
func (p *Producer) Ping(ctx context.Context) error { return p.cl.Ping(ctx) }

// Close closes the client. Every Publish waited for its records, so nothing
// is left buffered.
func (p *Producer) Close() error {
	p.cl.Close()
	return nil
}

// samePartition keeps a record on the partition it names when the topic has
// it, and otherwise partitions by murmur2 of the key.
type samePartition struct{}

func (samePartition) ForTopic(string) kgo.TopicPartitioner {
	return samePartitionTopic{keys: kgo.StickyKeyPartitioner(nil).ForTopic("")}
}

type samePartitionTopic struct{ keys kgo.TopicPartitioner }

func (s samePartitionTopic) RequiresConsistency(*kgo.Record) bool { return true }

func (s samePartitionTopic) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 && int(r.Partition) < n {
		return int(r.Partition)
	}
	return s.keys.Partition(r, n)
}
