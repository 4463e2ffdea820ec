package auth

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Memory bounds of the limiter: buckets idle for idleAfter are dropped at
// the next sweep (a full bucket forgotten is the same as a new one), and
// never more than maxClients buckets are kept.
const (
	idleAfter  = 10 * time.Minute
	sweepEvery = time.Minute
	maxClients = 10_000
)

// limiter is a token bucket per client (the token's subject) in this
// instance.
type limiter struct {
	rps   rate.Limit
	burst int

	mu        sync.Mutex
	clients   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(rps float64, burst int) *limiter {
	return &limiter{rps: rate.Limit(rps), burst: burst, clients: map[string]*bucket{}}
}

// allow takes one request of client at now; when the client is over its
// rate it returns false and how long until a request would be allowed.
func (l *limiter) allow(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= maxClients {
			l.evictOldest()
		}
		b = &bucket{lim: rate.NewLimiter(l.rps, l.burst)}
		l.clients[client] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for c, b := range l.clients {
		if now.Sub(b.seen) >= idleAfter {
			delete(l.clients, c)
		}
	}
}

func (l *limiter) evictOldest() {
	var oldest string
	var at time.Time
	for c, b := range l.clients {
		if oldest == "" || b.seen.Before(at) {
			oldest, at = c, b.seen
		}
	}
	delete(l.clients, oldest)
}

// size is the number of buckets kept (tests).
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
