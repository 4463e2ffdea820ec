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
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{11, 500 * time.Millisecond, time.Second},
		{1000, 500 * time.Millisecond, time.Second},
	} {
		for range 50 {
			if d := broker.ConsumerRetryBackoff(tc.fails); d < tc.min || d > tc.max {
				t.Fatalf("ConsumerRetryBackoff(%d) = %s, want within [%s, %s]", tc.fails, d, tc.min, tc.max)
			}
		}
	}
}
