package poll

import (
	"testing"
	"time"
)

// WhileProgressing checks cond every Interval until it reports done. A
// flow's speed depends on the host (the race detector, parallel tests, a
// shared broker), so the deadline is on progress: it fails tb when cond's
// progress value has not changed for stall (the flow is stuck), or when
// within has passed, with what and cond's last explanation.
func WhileProgressing(tb testing.TB, stall, within time.Duration, what string, cond func() (done bool, progress int64, why string)) {
	tb.Helper()
	start := time.Now()
	last, lastChange := int64(-1<<63), start
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		ok, progress, why := cond()
		if ok {
			return
		}
		now := time.Now()
		if progress != last {
			last, lastChange = progress, now
		}
		if now.Sub(lastChange) > stall {
			tb.Fatalf("%s: no progress for %v (after %v): %s", what, stall, now.Sub(start).Round(time.Millisecond), why)
		}
		if now.Sub(start) > within {
			tb.Fatalf("%s: not done after %v: %s", what, within, why)
		}
		<-t.C
	}
}
