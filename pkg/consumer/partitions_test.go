package consumer_test

import (
	"context"
	"errors"
	"log/slog"
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

// TestPartitionsOfAFetchAreHandledConcurrently: the first record of each of
// two partitions, fetched together, waits for the other's to start. Handled
// one partition after the other, the first would wait in vain (and go to
// the DLT); handled concurrently, both meet. Within each partition, records
// keep their offset order, for the record handler and the batch handler.
func TestPartitionsOfAFetchAreHandledConcurrently(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		name := "record handler"
		if batch {
			name = "batch handler"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
			topic := kafkatest.Topic(t, "consumer-partitions", 2)
			kafkatest.CreateTopic(t, events.DLT(topic), 2)
			w := broker.NewDLTWriter(kcfg) // honours Message.Partition
			t.Cleanup(func() { _ = w.Close() })
			var msgs []kafka.Message
			for _, v := range []string{"a0", "a1", "a2", "b0", "b1", "b2"} {
				p := 0
				if v[0] == 'b' {
					p = 1
				}
				msgs = append(msgs, kafka.Message{Topic: topic, Partition: p, Key: []byte(v[:1]), Value: []byte(v)})
			}
			// Written before the consumer starts: its first fetch holds both
			// partitions.
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				t.Fatal(err)
			}

			var mu sync.Mutex
			order := map[string][]string{}
			started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
			closeOnce := map[string]*sync.Once{"a": {}, "b": {}}
			other := map[string]string{"a": "b", "b": "a"}
			var timeouts []string
			handle := func(v string) error {
				mu.Lock()
				order[v[:1]] = append(order[v[:1]], v)
				mu.Unlock()
				if v[1] != '0' {
					return nil
				}
				closeOnce[v[:1]].Do(func() { close(started[v[:1]]) })
				select {
				case <-started[other[v[:1]]]:
					return nil
				case <-time.After(5 * time.Second):
					mu.Lock()
					timeouts = append(timeouts, v)
					mu.Unlock()
					return consumer.Permanent(errors.New(v + " waited 5s for the other partition"))
				}
			}
			cfg := consumer.Config{
				Broker: kcfg, Group: kafkatest.Group(t, "partitions"), Topics: []string{topic},
				Handler:   func(_ context.Context, m kafka.Message) error { return handle(string(m.Value)) },
				Policy:    consumer.Blocking{Backoff: consumer.Backoff{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond}, Retries: 0},
				Publisher: w, Logger: slog.New(slog.DiscardHandler),
			}
			if batch {
				cfg.Batch = func(_ context.Context, ms []kafka.Message) error {
					for _, m := range ms {
						if err := handle(string(m.Value)); err != nil {
							return err
						}
					}
					return nil
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- consumer.Run(ctx, cfg) }()
			waitFor(t, 60*time.Second, "every record handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(order["a"]) >= 3 && len(order["b"]) >= 3 || len(timeouts) > 0
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if len(timeouts) > 0 {
				t.Fatalf("%v waited in vain for the other partition: partitions handled one after the other", timeouts)
			}
			want := map[string][]string{"a": {"a0", "a1", "a2"}, "b": {"b0", "b1", "b2"}}
			if diff := cmp.Diff(want, order); diff != "" {
				t.Errorf("records handled per partition (-want +got):\n%s", diff)
			}
		})
	}
}
