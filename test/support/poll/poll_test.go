package poll_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/poll"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	t.Parallel()
	calls := 0
	poll.Until(t, time.Second, "third look", func() (bool, string) { calls++; return calls == 3, "" })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// fakeTB records a Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stop{})
}

type stop struct{}

func TestUntilFailsAtDeadlineWithState(t *testing.T) {
	t.Parallel()
	f := &fakeTB{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stop); !ok {
					panic(r)
				}
			}
		}()
		poll.Until(f, 100*time.Millisecond, "never", func() (bool, string) { return false, "still no" })
	}()
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("gave up after %v, before the deadline", time.Since(start))
	}
	if !strings.Contains(f.msg, "waiting for never") || !strings.Contains(f.msg, "still no") {
		t.Errorf("failure message = %q", f.msg)
	}
}

// Wait says whether the condition held before the deadline, and never
// fails the test.
func TestWait(t *testing.T) {
	n := 0
	if !poll.Wait(10*time.Second, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Errorf("Wait returned false for a condition that held on the third look")
	}
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	if poll.Wait(5*time.Millisecond, time.Millisecond, func() bool { return false }) {
		t.Errorf("Wait returned true for a condition that never held")
	}
}
