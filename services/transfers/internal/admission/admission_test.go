package admission_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/services/transfers/internal/admission"
)

// fakeBacklog is the backlog a test sets.
type fakeBacklog struct {
	mu sync.Mutex
	b  outbox.Backlog
}

func (f *fakeBacklog) set(age time.Duration, pending int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = outbox.Backlog{Pending: pending, OldestAge: age}
}

func (f *fakeBacklog) Backlog(context.Context) (outbox.Backlog, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b, nil
}

// clock is a fake clock a test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func refresh(tb testing.TB, c *admission.Controller) {
	tb.Helper()
	if err := c.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

const step = 10 * time.Millisecond

// offer runs d of traffic at the given rate per client (requests per
// step), refreshing every refreshEvery, and returns what each client got
// admitted.
func offer(tb testing.TB, c *admission.Controller, clk *clock, d, refreshEvery time.Duration, perStep map[string]int) map[string]int {
	tb.Helper()
	got := map[string]int{}
	for t := time.Duration(0); t < d; t += step {
		for client, n := range perStep {
			for range n {
				if ok, _ := c.Admit(client); ok {
					got[client]++
				}
			}
		}
		clk.advance(step)
		if (t+step)%refreshEvery == 0 {
			refresh(tb, c)
		}
	}
	return got
}

// Under the bound everything is admitted; past it, a client beyond its
// share is refused with a Retry-After of at least the backlog's age.
func TestShedsOnlyPastTheBound(t *testing.T) {
	t.Parallel()
	clk, bl := newClock(), &fakeBacklog{}
	c := admission.New(admission.Config{MaxAge: 2 * time.Second, Refresh: 250 * time.Millisecond}, bl, clk.now, nil)
	bl.set(time.Second, 100)
	got := offer(t, c, clk, time.Second, 250*time.Millisecond, map[string]int{"a": 5})
	if got["a"] != 500 {
		t.Fatalf("under the bound admitted %d of 500", got["a"])
	}
	bl.set(5*time.Second, 100)
	refresh(t, c)
	shed := 0
	for range 1000 {
		ok, retry := c.Admit("a")
		if !ok {
			shed++
			if retry < 5*time.Second || retry > 8*time.Second || retry%time.Second != 0 {
				t.Fatalf("Retry-After %v for a backlog of 5s: want whole seconds in [5s, 8s]", retry)
			}
		}
	}
	if shed < 800 {
		t.Fatalf("past the bound shed %d of 1000 requests sent at once", shed)
	}
}

// The count bound sheds as well, when set.
func TestShedsPastThePendingBound(t *testing.T) {
	t.Parallel()
	clk, bl := newClock(), &fakeBacklog{}
	c := admission.New(admission.Config{MaxAge: time.Minute, MaxPending: 1000, Refresh: 250 * time.Millisecond}, bl, clk.now, nil)
	bl.set(100*time.Millisecond, 5000)
	refresh(t, c)
	shed := 0
	for range 100 {
		if ok, _ := c.Admit("a"); !ok {
			shed++
		}
	}
	if shed < 90 {
		t.Fatalf("past the pending bound shed %d of 100", shed)
	}
}

// A client sending ten times what another sends does not take the
// admitted rate: the light client keeps getting nearly all it asks for
// while the heavy one is held to its share.
func TestShedsFairly(t *testing.T) {
	t.Parallel()
	clk, bl := newClock(), &fakeBacklog{}
	c := admission.New(admission.Config{MaxAge: 2 * time.Second, Refresh: 250 * time.Millisecond}, bl, clk.now, nil)
	load := map[string]int{"light": 1, "heavy": 10} // 100/s and 1000/s
	bl.set(0, 0)
	offer(t, c, clk, time.Second, 250*time.Millisecond, load)
	// Over the bound and growing for two seconds: the admitted rate falls
	// well below what is offered.
	for i := range 8 {
		bl.set(3*time.Second+time.Duration(i)*time.Second, 0)
		offer(t, c, clk, 250*time.Millisecond, 250*time.Millisecond, load)
	}
	// Over the bound, steady: measure each client's admitted requests.
	bl.set(10*time.Second, 0)
	got := offer(t, c, clk, 4*time.Second, 250*time.Millisecond, load)
	light, heavy := got["light"], got["heavy"]
	t.Logf("admitted in 4s: light %d of 400, heavy %d of 4000", light, heavy)
	if light < 360 {
		t.Errorf("the light client got %d of its 400 requests admitted while shedding: want at least 90%%", light)
	}
	if heavy > 4000/2 {
		t.Errorf("the heavy client got %d of its 4000 requests admitted: it was not shed", heavy)
	}
	if heavy > 2*light+400 {
		t.Errorf("the heavy client got %d admitted against the light one's %d: more than its share", heavy, light)
	}
}

// Once the backlog is back under the bound the admitted rate grows back
// and shedding ends.
func TestStopsSheddingUnderTheBound(t *testing.T) {
	t.Parallel()
	clk, bl := newClock(), &fakeBacklog{}
	c := admission.New(admission.Config{MaxAge: 2 * time.Second, Refresh: 250 * time.Millisecond}, bl, clk.now, nil)
	bl.set(10*time.Second, 0)
	offer(t, c, clk, time.Second, 250*time.Millisecond, map[string]int{"a": 2})
	bl.set(0, 0)
	offer(t, c, clk, 10*time.Second, 250*time.Millisecond, map[string]int{"a": 2})
	got := offer(t, c, clk, time.Second, 250*time.Millisecond, map[string]int{"a": 2})
	if got["a"] != 200 {
		t.Fatalf("under the bound again, admitted %d of 200", got["a"])
	}
}

// With the bound at 0 nothing is ever shed.
func TestOffNeverSheds(t *testing.T) {
	t.Parallel()
	clk, bl := newClock(), &fakeBacklog{}
	c := admission.New(admission.Config{}, bl, clk.now, nil)
	bl.set(time.Hour, 1e6)
	refresh(t, c)
	for range 100 {
		if ok, _ := c.Admit("a"); !ok {
			t.Fatal("admission control off shed a request")
		}
	}
}

// Retry-After grows with the backlog and is jittered.
func TestRetryAfterGrowsWithTheBacklogAndIsJittered(t *testing.T) {
	t.Parallel()
	spread := func(age time.Duration) (lo, hi time.Duration, distinct int) {
		seen := map[time.Duration]bool{}
		lo = time.Hour
		for range 500 {
			r := admission.RetryAfter(age)
			seen[r] = true
			lo, hi = min(lo, r), max(hi, r)
		}
		return lo, hi, len(seen)
	}
	lo3, hi3, n3 := spread(3 * time.Second)
	lo20, _, n20 := spread(20 * time.Second)
	if lo3 < 3*time.Second || hi3 > 5*time.Second {
		t.Errorf("Retry-After for a backlog of 3s in [%v, %v]: want within [3s, 5s]", lo3, hi3)
	}
	if lo20 <= hi3 {
		t.Errorf("Retry-After for a backlog of 20s from %v: not above the 3s backlog's highest %v", lo20, hi3)
	}
	if n3 < 2 || n20 < 5 {
		t.Errorf("Retry-After took %d and %d distinct values: not jittered", n3, n20)
	}
	if lo, _, _ := spread(0); lo < time.Second {
		t.Errorf("Retry-After for no backlog %v: want at least 1s", lo)
	}
	if _, hi, _ := spread(time.Hour); hi > time.Minute {
		t.Errorf("Retry-After for a backlog of an hour up to %v: want capped", hi)
	}
}
