// Package periodic is the one shape of the suite's side loops (the outbox's
// cleanup, gauges and broker probe, the inbox cleanup, the consumer lag
// gauge, the console's sampler): a function called at intervals until the
// context ends.
package periodic

import (
	"context"
	"time"
)

// Every calls fn after each interval until ctx ends, and then returns.
// interval is asked anew before each wait, so that it may be jittered.
func Every(ctx context.Context, interval func() time.Duration, fn func()) {
	t := time.NewTimer(interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
		t.Reset(interval())
	}
}

// Fixed is an interval of d every time.
func Fixed(d time.Duration) func() time.Duration {
	return func() time.Duration { return d }
}
