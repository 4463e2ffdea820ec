// Package admission is the transfers service's admission control at the
// door: it watches how far behind the outbox relay is and, past a bound,
// sheds new transfer requests (503 overloaded) before they write
// anything, admitting each client at most its fair share of what the flow
// behind the door can take.
//
// The decision reads state refreshed in the background (Run, or Refresh in
// tests): a request costs a mutex and a token bucket, never a query.
package admission

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// Defaults of Config.
const (
	DefaultMaxAge  = 2 * time.Second
	DefaultRefresh = 250 * time.Millisecond
)

// Tuning of the admitted rate while shedding (see Refresh).
const (
	// startFraction of the rate admitted before the bound was passed is
	// what shedding starts with.
	startFraction = 0.9
	// decrease multiplies the admitted rate at each refresh that finds the
	// backlog over the bound and still growing.
	decrease = 0.8
	// increase multiplies it at each refresh that finds the backlog under
	// the bound; shedding stops once it reaches the offered rate.
	increase = 1.5
	// minRate is the least admitted rate, per second: shedding never
	// shuts the door.
	minRate = 1.0
	// maxRetryAfter caps Retry-After.
	maxRetryAfter = time.Minute
)

// Config bounds the backlog.
type Config struct {
	// MaxAge is the oldest an unpublished outbox event may be before new
	// transfers are shed; 0 turns admission control off.
	MaxAge time.Duration
	// MaxPending, if positive, also sheds past this many unpublished
	// events.
	MaxPending int64
	// Refresh is how often the backlog is read; default DefaultRefresh.
	Refresh time.Duration
}

// Controller decides whether a new transfer request is admitted.
type Controller struct {
	cfg     Config
	backlog outbox.BacklogReader
	now     func() time.Time
	metrics *Metrics
	fair    *auth.Limiter

	mu sync.Mutex
	// shedding is set from a refresh that found the backlog over the bound
	// until the admitted rate is back to the offered rate.
	shedding bool
	// rate is the total admitted rate, per second, while shedding.
	rate float64
	// age is the backlog's age at the last refresh: the Retry-After's base.
	age time.Duration
	// prevAge tells whether the backlog still grows.
	prevAge time.Duration
	// Counted since the last refresh: requests offered, admitted, and the
	// clients that sent them.
	offered, admitted int
	clients           map[string]struct{}
	since             time.Time
}

// New returns a controller reading backlog. now is the clock (time.Now in
// production); metrics may be nil.
func New(cfg Config, backlog outbox.BacklogReader, now func() time.Time, metrics *Metrics) *Controller {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Controller{cfg: cfg, backlog: backlog, now: now, metrics: metrics,
		fair: auth.NewLimiter(minRate, 1), clients: map[string]struct{}{}, since: now()}
}

// Run refreshes the state every Config.Refresh until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.cfg.MaxAge <= 0 {
		return nil
	}
	periodic.Every(ctx, periodic.Fixed(c.cfg.Refresh), func() { _ = c.Refresh(ctx) })
	return nil
}

// Refresh reads the backlog and updates the decision's state. Over the
// bound, shedding starts at startFraction of the rate admitted since the
// last refresh, and the admitted rate falls by decrease at each refresh
// that finds the backlog older than at the one before; under the bound it
// grows by increase until it reaches the offered rate, and shedding stops.
// The admitted rate is split evenly among the clients that sent requests
// since the last refresh: each has a token bucket of rate/clients.
// A failed read keeps the state as it was.
func (c *Controller) Refresh(ctx context.Context) error {
	// Bounded: a read stuck on a hung server would freeze the decision
	// until the server woke.
	bctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	b, err := c.backlog.Backlog(bctx)
	cancel()
	if err != nil {
		return err
	}
	over := b.OldestAge > c.cfg.MaxAge || (c.cfg.MaxPending > 0 && b.Pending > c.cfg.MaxPending)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	dt := now.Sub(c.since).Seconds()
	if dt <= 0 {
		dt = c.cfg.Refresh.Seconds()
	}
	offered, admitted := float64(c.offered)/dt, float64(c.admitted)/dt
	clients := max(1, len(c.clients))
	c.offered, c.admitted, c.clients, c.since = 0, 0, map[string]struct{}{}, now
	c.prevAge, c.age = c.age, b.OldestAge
	switch {
	case over && !c.shedding:
		c.shedding, c.rate = true, admitted*startFraction
	case over && b.OldestAge > c.prevAge:
		c.rate *= decrease
	case !over && c.shedding:
		c.rate *= increase
		if c.rate >= offered {
			c.shedding = false
		}
	}
	c.rate = max(c.rate, minRate)
	share := c.rate / float64(clients)
	c.fair.SetRate(share, max(1, int(share*c.cfg.Refresh.Seconds())), now)
	c.metrics.Shedding.Set(boolGauge(c.shedding))
	return nil
}

// Admit reports whether client may create a transfer now; when not, it
// also returns the Retry-After to send: the backlog's age (how long the
// flow behind the door takes to catch up, by Little's law), at least a
// second, jittered up to half again so that the refused clients do not
// come back together.
func (c *Controller) Admit(client string) (bool, time.Duration) {
	if c.cfg.MaxAge <= 0 {
		return true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offered++
	c.clients[client] = struct{}{}
	if !c.shedding {
		c.admitted++
		return true, 0
	}
	ok, wait := c.fair.Allow(client, c.now())
	if ok {
		c.admitted++
		return true, 0
	}
	c.metrics.Shed.Inc()
	return false, RetryAfter(max(c.age, wait))
}

// RetryAfter is the Retry-After for a backlog of age: the age, at least a
// second and at most two thirds of maxRetryAfter, times a random factor in
// [1, 1.5), in whole seconds rounded up: never more than maxRetryAfter.
func RetryAfter(age time.Duration) time.Duration {
	base := min(max(age, time.Second), maxRetryAfter*2/3)
	s := math.Ceil(base.Seconds() * (1 + rand.Float64()/2)) //nolint:gosec // jitter, not a secret
	return time.Duration(s) * time.Second
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
