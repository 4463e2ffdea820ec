package auth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// Limiter is a token bucket per client in this instance: per token
// subject for the requests served (the authentication's rate limit), per
// source address for the refused ones, and the transfers service's fair
// share per client while it sheds load.
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

// RefusalLimit bounds the requests refused for a missing or bad token
// (401) from one source address, in one instance: over it they are
// answered 429 with Retry-After. Requests with a valid token never count,
// nor do the public paths. Its zero value is DefaultRefusalLimit.
type RefusalLimit struct {
	// RPS and Burst are the token bucket of one source address.
	RPS   float64 `env:"AUTH_REFUSED_RATE_RPS" envDefault:"10" help:"refused (401) requests per second per source address and instance; over it, 429"`
	Burst int     `env:"AUTH_REFUSED_RATE_BURST" envDefault:"100" help:"burst of refused requests per source address and instance"`
	// ClientIPHeader, when set, is the header in which a trusted proxy in
	// front of the service puts the client's address (X-Forwarded-For,
	// X-Real-IP): its last comma-separated value, the one the nearest
	// proxy added, is the source address. Unset, the source is the
	// connection's peer (RemoteAddr) and any such header is ignored, so
	// that a client cannot pick its own bucket.
	ClientIPHeader string `env:"AUTH_TRUSTED_PROXY_HEADER" help:"header holding the client address set by a trusted proxy (X-Forwarded-For); unset: the connection's peer address"`
}

// DefaultRefusalLimit is what an unset RefusalLimit means.
var DefaultRefusalLimit = RefusalLimit{RPS: 10, Burst: 100}

// Validate reports every problem of l at once.
func (l RefusalLimit) Validate() error {
	var errs []error
	if !(l.RPS > 0) { // NaN too
		errs = append(errs, errors.New("AUTH_REFUSED_RATE_RPS must be positive"))
	}
	if l.Burst < 1 {
		errs = append(errs, errors.New("AUTH_REFUSED_RATE_BURST must be at least 1"))
	}
	if h := l.ClientIPHeader; h != "" && strings.Trim(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		errs = append(errs, fmt.Errorf("AUTH_TRUSTED_PROXY_HEADER: %q is not a header name", h))
	}
	return errors.Join(errs...)
}

// WithRefusalLimit sets the limit of refused requests per source address
// (DefaultRefusalLimit without it).
func WithRefusalLimit(l RefusalLimit) Option {
	return func(a *Authenticator) { a.refusalCfg = l }
}

// Option configures New.
type Option func(*Authenticator)

// source is the address whose bucket a refused request r takes: an IPv4
// address, or an IPv6 address's /64 (what one subscriber holds).
func (l RefusalLimit) source(r *http.Request) string {
	addr := ""
	if l.ClientIPHeader != "" {
		if vs := r.Header.Values(l.ClientIPHeader); len(vs) > 0 {
			last := vs[len(vs)-1]
			addr = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
		}
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
		if splitErr != nil {
			host = r.RemoteAddr
		}
		if ip, err = netip.ParseAddr(host); err != nil {
			return host
		}
	}
	ip = ip.Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}
