package periodic_test

import (
	"context"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
)

// Every calls its function once per interval, asks for the interval before
// each wait, and returns once the context ends.
func TestEveryCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls, asked := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Every(ctx, func() time.Duration { asked++; return time.Millisecond }, func() {
			calls++
			if calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return within 10s of its context ending")
	}
	if calls != 3 || asked != 4 {
		t.Errorf("calls %d, intervals asked %d; want 3 and 4", calls, asked)
	}
}

// A context that has ended before the first interval runs nothing.
func TestEveryWithAnEndedContextRunsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	periodic.Every(ctx, periodic.Fixed(time.Hour), func() { t.Error("fn ran after the context ended") })
}
