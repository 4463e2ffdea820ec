package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
)

// An attempt whose dependency never answers (a database that hangs) is cut
// off at AttemptTimeout and the record tried again, as after any outage,
// without counting as an attempt; with no such bound in reach, the record
// is not handled while the first attempt waits.
func TestAnAttemptThatHangsIsCutOffAndTriedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		handled bool
		within  time.Duration
	}{
		{"bounded", 300 * time.Millisecond, true, 15 * time.Second},
		{"bound out of reach", time.Hour, false, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pc := policyCase{name: "attempt", policy: consumer.Blocking{Backoff: consumer.Backoff{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond}, Retries: 0}}
			f := newFixture(t, pc)
			f.produce(t, "v1")
			var mu sync.Mutex
			var attempts []error
			handled, release := make(chan struct{}), make(chan struct{})
			h := func(ctx context.Context, _ broker.Record) error {
				mu.Lock()
				n := len(attempts)
				attempts = append(attempts, nil)
				mu.Unlock()
				if n == 0 {
					// The first attempt hangs until cut off (or, once the
					// test has seen it hang, released).
					err := errors.New("released")
					select {
					case <-ctx.Done():
						err = fmt.Errorf("query: %w", ctx.Err())
					case <-release:
					}
					mu.Lock()
					attempts[0] = err
					mu.Unlock()
					return err
				}
				close(handled)
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- consumer.Run(ctx, consumer.Config{
					Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: h, Policy: pc.policy,
					Publisher: f.writer, Logger: slog.New(slog.DiscardHandler), AttemptTimeout: tc.timeout,
				})
			}()
			select {
			case <-handled:
				if !tc.handled {
					t.Fatal("handled while the first attempt should still hang")
				}
			case <-time.After(tc.within):
				if tc.handled {
					mu.Lock()
					defer mu.Unlock()
					t.Fatalf("not handled within %v; attempts: %v", tc.within, attempts)
				}
			}
			close(release)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if tc.handled {
				// Retries: 0, yet a second attempt came: the cut-off one
				// counted as an outage, not as the record's failure.
				mu.Lock()
				defer mu.Unlock()
				if len(attempts) != 2 || !errors.Is(attempts[0], context.DeadlineExceeded) {
					t.Errorf("attempts %v; want a first one cut off by its deadline, then a second", attempts)
				}
			}
		})
	}
}
