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

// Limiter is a token bucket per client (the token's subject) in this
// instance: the authentication's rate limit, and the transfers service's
// fair share while it sheds load.
type Limiter struct {
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

// NewLimiter returns a limiter giving every client rps requests per second
// with bursts of burst.
func NewLimiter(rps float64, burst int) *Limiter {
	return &Limiter{rps: rate.Limit(rps), burst: burst, clients: map[string]*bucket{}}
}

// Allow takes one request of client at now; when the client is over its
// rate it returns false and how long until a request would be allowed.
func (l *Limiter) Allow(client string, now time.Time) (bool, time.Duration) {
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

// SetRate gives every client, the ones kept and the ones to come, rps
// requests per second with bursts of burst, from now on.
func (l *Limiter) SetRate(rps float64, burst int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rps, l.burst = rate.Limit(rps), burst
	for _, b := range l.clients {
		b.lim.SetLimitAt(now, l.rps)
		b.lim.SetBurstAt(now, burst)
	}
}

func (l *Limiter) sweep(now time.Time) {
	l.lastSweep = now
	for c, b := range l.clients {
		if now.Sub(b.seen) >= idleAfter {
			delete(l.clients, c)
		}
	}
}

func (l *Limiter) evictOldest() {
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
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
