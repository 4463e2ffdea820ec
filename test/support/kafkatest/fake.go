package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Fake starts an in-process fake Kafka cluster (franz-go's kfake) with the
// given topics already created, each with partitions partitions, and returns
// the addresses to give a client. It is closed when the test ends.
//
// KFAKE IS NOT KAFKA. It is an in-process imitation written for franz-go's own
// tests: fast (no JVM, no network hop off the machine) and good for unit tests
// of code that only needs "a broker that answers", but its group
// coordination, retention, error codes and timing are its own. Anything about
// delivery guarantees, rebalancing, ordering under failure, or broker
// behaviour must be tested against the real broker ([Brokers], [Topic]).
//
// segmentio/kafka-go v0.4.51 works against it (verified by this package's
// tests): a Writer producing, a Reader with a GroupID consuming and
// committing, a second Reader of the group resuming after the commits, and
// two Readers of one group sharing the partitions after a rebalance.
//
// Like the real test broker, it does not create topics on first use: topics
// not listed here answer "Unknown Topic Or Partition" until created (with
// kafka.Client.CreateTopics, for example).
func Fake(tb testing.TB, partitions int, topics ...string) []string {
	tb.Helper()
	if partitions < 1 {
		tb.Fatalf("kafkatest: fake cluster with %d partitions: want at least 1", partitions)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(partitions),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(partitions), topics...)) //nolint:gosec // partition counts are small
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("kafkatest: start kfake cluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}
