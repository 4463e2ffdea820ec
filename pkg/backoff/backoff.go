// Package backoff is the suite's one retry delay. Every wait before a retry
// computes its delay here: the outbox relay's stored next_attempt_at, the
// consumer loop's blocking retries and its retries of a forward to a retry
// topic or DLT, and the database's transaction retries. Only the numbers
// differ between them, never the shape.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential is a delay that starts at Initial and grows by Multiplier per
// attempt, at most Max. With Jitter, a delay d becomes a random one in
// [d/2, d] ("equal jitter"), so that contenders retrying together spread
// out.
type Exponential struct {
	Initial    time.Duration
	Multiplier float64
	Max        time.Duration
	Jitter     bool
}

// Delay returns the wait before retry number n (1-based): Initial for the
// first, Initial*Multiplier for the second, and so on, at most Max (then
// jittered when Jitter is set). n below 1 counts as 1.
func (e Exponential) Delay(n int) time.Duration {
	d := float64(e.Initial)
	for i := 1; i < n && d < float64(e.Max); i++ {
		d *= e.Multiplier
	}
	out := min(time.Duration(d), e.Max)
	if e.Jitter && out > 0 {
		out = out/2 + rand.N(out/2+1)
	}
	return out
}
