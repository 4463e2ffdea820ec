package poll

import (
	"testing"
	"time"
)

// Never checks cond every Interval for the whole of within and fails tb
// with what and cond's state as soon as cond reports true: how a test shows
// that something does not happen (a record held back, say). within is the
// window the claim is made for, not a guess at how long something takes.
func Never(tb testing.TB, within time.Duration, what string, cond func() (happened bool, state string)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		if ok, state := cond(); ok {
			tb.Fatalf("%s happened within %v (state: %s)", what, within, state)
		}
		if time.Now().After(deadline) {
			return
		}
		<-t.C
	}
}
