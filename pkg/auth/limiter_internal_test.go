package auth

import (
	"strconv"
	"testing"
	"time"
)

// TestLimiterBoundedWork: a full limiter evicts its least recently used
// bucket (not the first one made), and buckets gone idle are dropped a few
// per call, never all at once: no call walks every bucket under the lock.
func TestLimiterBoundedWork(t *testing.T) {
	t.Parallel()
	l := NewLimiter(1, 1)
	t0 := time.Now()
	for i := range maxClients {
		l.Allow("c"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Microsecond))
	}
	if n := l.size(); n != maxClients {
		t.Fatalf("%d buckets, want %d", n, maxClients)
	}
	// c0 is the oldest made but used again now: c1 is the least recently
	// used, and the one a new client evicts.
	now := t0.Add(time.Second)
	l.Allow("c0", now)
	l.Allow("new", now)
	if n := l.size(); n != maxClients {
		t.Fatalf("%d buckets after an eviction, want %d", n, maxClients)
	}
	if ok, _ := l.Allow("c0", now); ok {
		t.Error("c0 was evicted (its bucket came back full): want the least recently used, c1")
	}
	if over, _ := l.Exhausted("c1", now); over {
		t.Error("c1 kept: want it evicted")
	}

	// Every bucket idle: one call drops sweepPerCall of them, not all.
	later := now.Add(idleAfter + time.Minute)
	l.Allow("fresh", later)
	if got, want := l.size(), maxClients+1-sweepPerCall; got != want {
		t.Errorf("%d buckets after one call past the idle time, want %d (a bounded sweep)", got, want)
	}
	for range maxClients {
		l.Allow("fresh", later)
	}
	if got := l.size(); got != 1 {
		t.Errorf("%d buckets once the idle ones were swept call by call, want 1", got)
	}
}

// TestLimiterExhausted: Exhausted looks at a bucket without taking from
// it, and says how long until it has a request again.
func TestLimiterExhausted(t *testing.T) {
	t.Parallel()
	l := NewLimiter(0.5, 2)
	now := time.Now()
	if over, _ := l.Exhausted("a", now); over {
		t.Error("an unknown client is exhausted")
	}
	for range 2 {
		if over, _ := l.Exhausted("a", now); over {
			t.Fatal("exhausted before its burst was used")
		}
		l.Allow("a", now)
	}
	over, wait := l.Exhausted("a", now)
	if !over || wait != 2*time.Second {
		t.Errorf("Exhausted = %v, %v; want true, 2s", over, wait)
	}
	if over, _ := l.Exhausted("a", now.Add(2*time.Second)); over {
		t.Error("still exhausted once a request came back")
	}
}
