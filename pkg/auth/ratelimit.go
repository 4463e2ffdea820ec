package auth

import (
	"container/list"
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

// Memory bounds of the limiter: a bucket idle for idleAfter is dropped (a
// full bucket forgotten is the same as a new one), and never more than
// maxClients buckets are kept. The buckets are kept in the order they were
// last used, so that both drops take the least recently used ones from the
// back of that list: each call does a bounded amount of work under the
// lock (at most sweepPerCall idle buckets dropped, one evicted), never a
// scan of every bucket.
const (
	idleAfter    = 10 * time.Minute
	maxClients   = 10_000
	sweepPerCall = 8
)

// Limiter is a token bucket per client in this instance: per token
// subject for the requests served (the authentication's rate limit), per
// source address for the refused ones, and the transfers service's fair
// share per client while it sheds load.
type Limiter struct {
	rps   rate.Limit
	burst int

	mu      sync.RWMutex             // read-locked by Exhausted, on every authenticated request
	clients map[string]*list.Element // of *bucket
	lru     *list.List               // front: used last; back: idle longest
}

type bucket struct {
	client string
	lim    *rate.Limiter
	seen   time.Time
}

// NewLimiter returns a limiter giving every client rps requests per second
// with bursts of burst.
func NewLimiter(rps float64, burst int) *Limiter {
	return &Limiter{rps: rate.Limit(rps), burst: burst, clients: map[string]*list.Element{}, lru: list.New()}
}

// Allow takes one request of client at now; when the client is over its
// rate it returns false and how long until a request would be allowed.
func (l *Limiter) Allow(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	var b *bucket
	if e, ok := l.clients[client]; ok {
		b = e.Value.(*bucket)
		l.lru.MoveToFront(e)
	} else {
		if len(l.clients) >= maxClients {
			l.remove(l.lru.Back())
		}
		b = &bucket{client: client, lim: rate.NewLimiter(l.rps, l.burst)}
		l.clients[client] = l.lru.PushFront(b)
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

// Exhausted reports whether client has no request left at now, without
// taking one, and how long until it has one again. A client without a
// bucket (never seen, or idle long enough to be dropped) has its full
// burst.
func (l *Limiter) Exhausted(client string, now time.Time) (bool, time.Duration) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.clients[client]
	if !ok {
		return false, 0
	}
	tokens := e.Value.(*bucket).lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	if l.rps <= 0 {
		return true, time.Second
	}
	return true, time.Duration((1 - tokens) / float64(l.rps) * float64(time.Second))
}

// SetRate gives every client, the ones kept and the ones to come, rps
// requests per second with bursts of burst, from now on.
func (l *Limiter) SetRate(rps float64, burst int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rps, l.burst = rate.Limit(rps), burst
	for e := l.lru.Front(); e != nil; e = e.Next() {
		b := e.Value.(*bucket)
		b.lim.SetLimitAt(now, l.rps)
		b.lim.SetBurstAt(now, burst)
	}
}

// sweep drops up to sweepPerCall buckets idle for idleAfter, from the back
// of the list (the longest idle first).
func (l *Limiter) sweep(now time.Time) {
	for range sweepPerCall {
		e := l.lru.Back()
		if e == nil || now.Sub(e.Value.(*bucket).seen) < idleAfter {
			return
		}
		l.remove(e)
	}
}

func (l *Limiter) remove(e *list.Element) {
	if e == nil {
		return
	}
	delete(l.clients, e.Value.(*bucket).client)
	l.lru.Remove(e)
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
// nor do the public paths. The bucket is looked at before the token's
// signature is checked, so that an address over it costs no signature
// check (see Authenticator.Middleware). Its zero value is
// DefaultRefusalLimit.
type RefusalLimit struct {
	// RPS and Burst are the token bucket of one source address.
	RPS   float64 `env:"AUTH_REFUSED_RATE_RPS" help:"refused (401) requests per second per source address and instance; over it, 429"`
	Burst int     `env:"AUTH_REFUSED_RATE_BURST" help:"burst of refused requests per source address and instance"`
	// ClientIPHeader, when set, is the header in which a trusted proxy in
	// front of the service puts the client's address (X-Forwarded-For,
	// X-Real-IP). It is believed only on a connection whose peer is in
	// TrustedProxies; from any other peer it is ignored, so that a client
	// cannot pick its own bucket.
	ClientIPHeader string `env:"AUTH_TRUSTED_PROXY_HEADER" help:"header holding the client address set by a trusted proxy (X-Forwarded-For); needs AUTH_TRUSTED_PROXY_CIDRS; unset: the connection's peer address"`
	// TrustedProxies are the networks (CIDRs, or single addresses) of
	// the proxies whose ClientIPHeader is believed. The source address is
	// then the header's nearest value that is not itself a trusted proxy
	// (its values read from the last, the one the nearest proxy added).
	TrustedProxies []string `env:"AUTH_TRUSTED_PROXY_CIDRS" help:"comma-separated networks (10.0.0.0/8, 2001:db8::/32, 192.0.2.7) of the proxies whose AUTH_TRUSTED_PROXY_HEADER is believed; required with it"`
}

// DefaultRefusalLimit is what an unset RefusalLimit means, and the
// defaults of AUTH_REFUSED_RATE_RPS and AUTH_REFUSED_RATE_BURST.
var DefaultRefusalLimit = RefusalLimit{RPS: 10, Burst: 100}

// isZero reports whether l is unset.
func (l RefusalLimit) isZero() bool {
	return l.RPS == 0 && l.Burst == 0 && l.ClientIPHeader == "" && len(l.TrustedProxies) == 0
}

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
	if _, err := l.proxies(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case l.ClientIPHeader != "" && len(l.TrustedProxies) == 0:
		errs = append(errs, errors.New("AUTH_TRUSTED_PROXY_HEADER needs AUTH_TRUSTED_PROXY_CIDRS: the networks of the proxies that set it (from any other peer the header is a client's own claim)"))
	case l.ClientIPHeader == "" && len(l.TrustedProxies) > 0:
		errs = append(errs, errors.New("AUTH_TRUSTED_PROXY_CIDRS is set without AUTH_TRUSTED_PROXY_HEADER: name the header those proxies set"))
	}
	return errors.Join(errs...)
}

// proxies parses TrustedProxies: CIDRs, or single addresses (a /32 or
// /128).
func (l RefusalLimit) proxies() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(l.TrustedProxies))
	for _, s := range l.TrustedProxies {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() && p.Bits() >= 96 { // ::ffff:10.0.0.0/104 is 10.0.0.0/8
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("AUTH_TRUSTED_PROXY_CIDRS: %q is neither a CIDR nor an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// WithRefusalLimit sets the limit of refused requests per source address
// (DefaultRefusalLimit without it).
func WithRefusalLimit(l RefusalLimit) Option {
	return func(a *Authenticator) { a.refusalCfg = l }
}

// Option configures New.
type Option func(*Authenticator)

// sourceOf says which address a refused request takes the bucket of: the
// connection's peer, or, when the peer is a trusted proxy, the address
// its header names.
type sourceOf struct {
	header  string
	trusted []netip.Prefix
}

func (s sourceOf) isTrusted(a netip.Addr) bool {
	for _, p := range s.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// source is the address whose bucket a refused request r takes: an IPv4
// address, or an IPv6 address's /64 (what one subscriber holds). The
// header is read only when the peer is a trusted proxy: its
// comma-separated values from the last (the one the nearest proxy added)
// back, skipping the trusted proxies, up to the first other address; a
// value that is not an address stops the walk at the last trusted hop.
func (s sourceOf) source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if s.header != "" && s.isTrusted(ip) {
		ip = s.forwarded(r, ip)
	}
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// forwarded walks the header's values of r back from the last while they
// are trusted proxies, starting from peer, and returns the first address
// that is not one (or the last trusted one).
func (s sourceOf) forwarded(r *http.Request, peer netip.Addr) netip.Addr {
	vs := r.Header.Values(s.header)
	for i := len(vs) - 1; i >= 0; i-- {
		parts := strings.Split(vs[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return peer
			}
			peer = a.Unmap()
			if !s.isTrusted(peer) {
				return peer
			}
		}
	}
	return peer
}
