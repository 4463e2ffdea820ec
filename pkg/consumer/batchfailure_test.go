package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
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
		Publisher: f.writer, Logger: slog.New(slog.DiscardHandler), MaxBatch: 10,
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, cfg) }()
	waitFor(t, 30*time.Second, "c handled, and the failed record from its retry topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(calls, "bad@retry") && slices.Contains(calls, "c@main")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
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
