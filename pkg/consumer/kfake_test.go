package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/poll"
)

// TestReadCommittedOnKfake: the in-process fake broker `make demo` runs on
// serves the consumer's read_committed group fetches too (the contract
// itself is tested on the real broker, TestReadCommitted).
func TestReadCommittedOnKfake(t *testing.T) {
	t.Parallel()
	topic := "kfake.txn"
	brokers := kafkatest.Fake(t, 1, topic, events.DLT(topic))
	prod := kafkatest.NewProducer(t, brokers...)
	msg := func(v string) kafka.Message { return kafka.Message{Topic: topic, Key: []byte("K"), Value: []byte(v)} }
	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, consumer.Config{
			Broker: broker.Config{Brokers: brokers}, Group: "g", Topics: []string{topic},
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(_ context.Context, m broker.Record) error {
				mu.Lock()
				got = append(got, string(m.Value))
				mu.Unlock()
				return nil
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer.Run: %v", err)
		}
	})
	handled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}

	prod.Plain(msg("n0"))
	prod.Begin()
	prod.InTxn(msg("t1"), msg("t2"))
	prod.Commit()
	prod.Begin()
	prod.InTxn(msg("a1"))
	prod.Abort()
	prod.Plain(msg("n1"))
	prod.Begin()
	prod.InTxn(msg("t3"))
	prod.Plain(msg("n2"))
	poll.Until(t, 30*time.Second, "n1 handled", func() (bool, string) {
		h := handled()
		return len(h) > 0 && h[len(h)-1] == "n1", strings.Join(h, ",")
	})
	poll.Never(t, time.Second, "a record behind the open transaction handled", func() (bool, string) {
		h := handled()
		return len(h) > 4, fmt.Sprint(h)
	})
	prod.Commit()
	poll.Until(t, 30*time.Second, "n2 handled", func() (bool, string) {
		h := handled()
		return len(h) > 0 && h[len(h)-1] == "n2", strings.Join(h, ",")
	})
	if diff := cmp.Diff([]string{"n0", "t1", "t2", "n1", "t3", "n2"}, handled()); diff != "" {
		t.Errorf("records handled (-want +got):\n%s", diff)
	}
}
