package broker_test

import (
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
)

// A consumer retries a failed request or group join within about a second
// however many attempts failed, so the flow resumes soon after a broker
// outage ends; the first retries come sooner.
func TestConsumerRetryBackoffIsShortAndBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fails    int
		min, max time.Duration
	}{
		{0, 80 * time.Millisecond, 120 * time.Millisecond},
		{1, 80 * time.Millisecond, 120 * time.Millisecond},
		{2, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 320 * time.Millisecond, 480 * time.Millisecond},
		{5, 800 * time.Millisecond, 1200 * time.Millisecond},
		{11, 800 * time.Millisecond, 1200 * time.Millisecond},
		{1000, 800 * time.Millisecond, 1200 * time.Millisecond},
	} {
		for range 50 {
			if d := broker.ConsumerRetryBackoff(tc.fails); d < tc.min || d > tc.max {
				t.Fatalf("ConsumerRetryBackoff(%d) = %s, want within [%s, %s]", tc.fails, d, tc.min, tc.max)
			}
		}
	}
}
