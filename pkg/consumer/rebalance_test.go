package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/poll"
)

// A rebalance that waits for a member's batch (the member holds its
// partitions until it commits): the member finishes the partition in hand,
// commits, rewinds the rest of the batch and lets the rebalance happen,
// rather than handling the whole batch first. Every record is still handled
// exactly once.
func TestRebalanceWaitsOnlyForThePartitionInHand(t *testing.T) {
	t.Parallel()
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-rebalance", 2)
	group := kafkatest.Group(t, "rebalance")
	prod := kafkatest.NewProducer(t)
	const perPartition = 5
	for p := range 2 {
		for i := range perPartition {
			v := fmt.Sprintf("p%d-%d", p, i)
			prod.Plain(kafka.Message{Topic: topic, Partition: p, Key: []byte(v), Value: []byte(v)})
		}
	}
	adm, err := broker.NewAdminClient(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	state := func() (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err.Error(), 0
		}
		return gs[group].State, len(gs[group].Members)
	}

	var mu sync.Mutex
	counts := map[string]int{}
	var handled atomic.Int32
	started := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, m broker.Record) error {
		once.Do(func() {
			close(started)
			// Hold the first record until the group wants to rebalance
			// (the second member is joining; this member notices at its next
			// heartbeat, within a second). Not poll.Until: this runs
			// on the consumer's goroutine, where a test cannot fail; the
			// assertions below catch a rebalance that never came.
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
				if s, _ := state(); s == "PreparingRebalance" {
					break
				}
				<-time.After(poll.Interval)
			}
		})
		// A slow handler (its work, not a wait for a condition): handling
		// the rest of the batch would hold the rebalance.
		<-time.After(300 * time.Millisecond)
		mu.Lock()
		counts[string(m.Value)]++
		mu.Unlock()
		handled.Add(1)
		return nil
	}
	run := func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- consumer.Run(ctx, consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic},
				Handler: h, Logger: slog.New(slog.DiscardHandler)})
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer.Run: %v", err)
			}
		})
	}
	run()
	<-started
	run()
	var atStable int32
	poll.Until(t, 60*time.Second, "a stable group of two", func() (bool, string) {
		n := handled.Load()
		s, members := state()
		if s == "Stable" && members == 2 {
			atStable = n
			return true, ""
		}
		return false, fmt.Sprintf("%s, %d members", s, members)
	})
	poll.Until(t, 60*time.Second, "every record handled", func() (bool, string) {
		n := handled.Load()
		return n >= 2*perPartition, fmt.Sprint(n)
	})
	if atStable >= 2*perPartition {
		t.Errorf("the rebalance completed only after all %d records of the batch were handled", atStable)
	}
	mu.Lock()
	defer mu.Unlock()
	for p := range 2 {
		for i := range perPartition {
			if v := fmt.Sprintf("p%d-%d", p, i); counts[v] != 1 {
				t.Errorf("%s handled %d times, want once", v, counts[v])
			}
		}
	}
}
