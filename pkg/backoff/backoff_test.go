package backoff_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/backoff"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    backoff.Exponential
		want []time.Duration // for n = 1, 2, ...
	}{
		{
			name: "blocking retries: 500 ms, x2, at most 15 s",
			e:    backoff.Exponential{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 15 * time.Second},
			want: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second},
		},
		{
			name: "capped from the start",
			e:    backoff.Exponential{Initial: time.Minute, Multiplier: 2, Max: time.Second},
			want: []time.Duration{time.Second, time.Second},
		},
		{
			name: "multiplier 1 is constant",
			e:    backoff.Exponential{Initial: time.Second, Multiplier: 1, Max: time.Minute},
			want: []time.Duration{time.Second, time.Second, time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []time.Duration
			for n := 1; n <= len(tt.want); n++ {
				got = append(got, tt.e.Delay(n))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("delays mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJitterStaysWithinHalfAndWhole(t *testing.T) {
	t.Parallel()
	e := backoff.Exponential{Initial: 500 * time.Millisecond, Multiplier: 2, Max: time.Minute, Jitter: true}
	for n := 1; n <= 10; n++ {
		whole := backoff.Exponential{Initial: e.Initial, Multiplier: e.Multiplier, Max: e.Max}.Delay(n)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := e.Delay(n)
			if d < whole/2 || d > whole {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, d, whole/2, whole)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("Delay(%d) took %d value(s) in 200 draws: no jitter", n, len(seen))
		}
	}
}
