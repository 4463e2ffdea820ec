package broker

import (
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewDLTProducer's partitioner keeps a record on the partition it names
// when the target has it, and hashes its key as the Java client (and
// kafka-go's Murmur2Balancer) does otherwise.
func TestSamePartition(t *testing.T) {
	t.Parallel()
	key := []byte("CC-001")
	hashed := func(n int) int {
		ps := make([]int, n)
		for i := range ps {
			ps[i] = i
		}
		return kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: key}, ps...)
	}
	tests := []struct {
		name       string
		partition  int32
		partitions int
		want       int
	}{
		{name: "the target has the partition", partition: 7, partitions: 12, want: 7},
		{name: "partition 0", partition: 0, partitions: 12, want: 0},
		{name: "the target has fewer partitions: key hash", partition: 7, partitions: 3, want: hashed(3)},
		{name: "one partition", partition: 7, partitions: 1, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := samePartition{}.ForTopic("t")
			if got := p.Partition(&kgo.Record{Key: key, Partition: tt.partition}, tt.partitions); got != tt.want {
				t.Errorf("Partition = %d, want %d", got, tt.want)
			}
		})
	}
}
