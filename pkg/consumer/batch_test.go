package consumer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/kafkatest"
)

// A batch that stops part way (consumer.BatchFailure) is not handled again
// from its start: the records it finished are not handled again, the one
// it attempted counts that attempt (with retry topics it goes straight to
// the first retry topic, never to the handler again at level 0), and the
// records after it are handled one by one. With a plain error the batch is
// handled again one by one, the failed record included: the test fails if
// the loop ignores BatchFailure.
func TestBatchFailureKeepsTheBatchAttempt(t *testing.T) {
	t.Parallel()
	pc := policies[1] // retry topics
	f := newFixture(t, pc)
	f.produce(t, "a", "bad", "c")

	var (
		mu      sync.Mutex
		batches [][]string
		calls   []string // one-by-one handler calls: value@topic-level
	)
	handler := func(_ context.Context, m broker.Record) error {
		mu.Lock()
		defer mu.Unlock()
		level := "main"
		if m.Topic != f.topic {
			level = "retry"
		}
		calls = append(calls, string(m.Value)+"@"+level)
		return nil // the receiver is back by the retry
	}
	cfg := consumer.Config{
		Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: handler, Policy: pc.policy,
		Publisher: f.writer, MaxBatch: 10,
		Batch: func(_ context.Context, ms []broker.Record) error {
			mu.Lock()
			defer mu.Unlock()
			var vs []string
			for _, m := range ms {
				vs = append(vs, string(m.Value))
			}
			batches = append(batches, vs)
			for i, m := range ms {
				if string(m.Value) == "bad" {
					return &consumer.BatchFailure{Handled: i, Err: errors.New("receiver down")}
				}
			}
			return nil
		},
	}
	m := startMember(t, cfg)
	waitFor(t, 30*time.Second, "c handled, and the failed record from its retry topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(calls, "bad@retry") && slices.Contains(calls, "c@main")
	})
	m.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(batches) == 0 || len(batches[0]) < 2 || batches[0][0] != "a" {
		t.Fatalf("batches %v: a and bad were not fetched as one batch", batches)
	}
	// Without BatchFailure the loop would hand a and bad to the handler
	// again at level 0 ("a@main", "bad@main").
	want := []string{"bad@retry", "c@main"}
	got := slices.Sorted(slices.Values(calls))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one-by-one handler calls (-want +got):\n%s\nbatches: %v", diff, batches)
	}
}

// TestPartitionsOfAFetchAreHandledConcurrently: the first record of each of
// two partitions waits for the other's to start. Handled one partition after
// the other, the first would wait in vain; handled concurrently, both meet.
// Within each partition, records keep their offset order, for the record
// handler and the batch handler.
//
// The records are written before the consumer starts, so its first poll
// usually holds both partitions; but which partitions a fetch holds is the
// client's and the broker's choice (a partition whose start offset is
// still loading is left out of the first fetch). A wait in vain is
// therefore also what a first poll of one partition shows, and the
// scenario runs again, on a fresh topic and group, up to attempts times:
// a consumer that handles partitions one after the other fails every one.
func TestPartitionsOfAFetchAreHandledConcurrently(t *testing.T) {
	t.Parallel()
	const attempts = 3
	for _, batch := range []bool{false, true} {
		name := "record handler"
		if batch {
			name = "batch handler"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var vain []string
			for i := range attempts {
				order, timeouts := partitionsMeet(t, batch)
				if len(timeouts) > 0 {
					vain = append(vain, timeouts...)
					t.Logf("attempt %d: %v waited in vain for the other partition", i+1, timeouts)
					continue
				}
				want := map[string][]string{"a": {"a0", "a1", "a2"}, "b": {"b0", "b1", "b2"}}
				if diff := cmp.Diff(want, order); diff != "" {
					t.Errorf("records handled per partition (-want +got):\n%s", diff)
				}
				return
			}
			t.Fatalf("in %d attempts, %v waited in vain for the other partition: partitions handled one after the other", attempts, vain)
		})
	}
}

// partitionsMeet runs the scenario once: it returns the records handled per
// partition and the first records that waited in vain for the other's.
func partitionsMeet(t *testing.T, batch bool) (order map[string][]string, timeouts []string) {
	t.Helper()
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-partitions", 2)
	kafkatest.CreateTopic(t, events.DLT(topic), 2)
	w := kafkatest.NewDLTWriter(t, kcfg) // honours Message.Partition
	defer func() { _ = w.Close() }()
	var msgs []kafka.Message
	for _, v := range []string{"a0", "a1", "a2", "b0", "b1", "b2"} {
		p := 0
		if v[0] == 'b' {
			p = 1
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Partition: p, Key: []byte(v[:1]), Value: []byte(v)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	order = map[string][]string{}
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	closeOnce := map[string]*sync.Once{"a": {}, "b": {}}
	other := map[string]string{"a": "b", "b": "a"}
	handle := func(v string) {
		mu.Lock()
		order[v[:1]] = append(order[v[:1]], v)
		mu.Unlock()
		if v[1] != '0' {
			return
		}
		closeOnce[v[:1]].Do(func() { close(started[v[:1]]) })
		select {
		case <-started[other[v[:1]]]:
		case <-time.After(3 * time.Second):
			mu.Lock()
			timeouts = append(timeouts, v)
			mu.Unlock()
		}
	}
	cfg := consumer.Config{
		Broker: kcfg, Group: kafkatest.Group(t, "partitions"), Topics: []string{topic},
		Handler:   func(_ context.Context, m broker.Record) error { handle(string(m.Value)); return nil },
		Policy:    consumer.Blocking{Backoff: consumer.Backoff{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond}, Retries: 0},
		Publisher: w,
	}
	if batch {
		cfg.Batch = func(_ context.Context, ms []broker.Record) error {
			for _, m := range ms {
				handle(string(m.Value))
			}
			return nil
		}
	}
	m := startMember(t, cfg)
	waitFor(t, 60*time.Second, "every record handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order["a"]) >= 3 && len(order["b"]) >= 3
	})
	m.stop(t)
	mu.Lock()
	defer mu.Unlock()
	return order, timeouts
}
