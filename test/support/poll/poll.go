// Package poll is how tests wait: they poll a condition until it holds or a
// deadline passes, and never sleep a fixed time hoping it is enough.
package poll

import (
	"testing"
	"time"
)

// Interval is the pause between two looks at a condition.
const Interval = 20 * time.Millisecond

// Until checks cond every Interval until it reports true. When within has
// passed first, it fails tb with what and the last state cond described.
func Until(tb testing.TB, within time.Duration, what string, cond func() (ok bool, state string)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state != "" {
				tb.Fatalf("timed out after %v waiting for %s (last state: %s)", within, what, state)
			}
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		<-t.C
	}
}

// True is Until for a condition with nothing to report.
func True(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	Until(tb, within, what, func() (bool, string) { return cond(), "" })
}

// Wait checks cond every interval until it reports true or within has
// passed, and says whether it held. It fails nothing: for checks whose
// failure is reported with figures (t.Errorf) and the test goes on.
func Wait(within, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-t.C
	}
}
