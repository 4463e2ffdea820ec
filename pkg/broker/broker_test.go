package broker_test

import (
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

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
		partition  int
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
			ps := make([]int, tt.partitions)
			for i := range ps {
				ps[i] = i
			}
			if got := (broker.SamePartition{}).Balance(kafka.Message{Key: key, Partition: tt.partition}, ps...); got != tt.want {
				t.Errorf("Balance = %d, want %d", got, tt.want)
			}
		})
	}
}
