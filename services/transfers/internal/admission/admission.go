// Package admission is the transfers service's admission control at the
// door: it watches how far behind the flow is (the outbox backlog the relay
// can send, read from the database so that every instance judges the same
// figure, and how long the transfers the projection settles took from POST to
// their result) and, past a bound, sheds new transfer requests (503
// overloaded) before they write anything, admitting at about the rate the
// flow settles, each client at most its fair share of it.
//
// The decision reads state refreshed in the background (Run, or Refresh in
// tests): a request costs a mutex and a token bucket, never a query.
package admission

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// Defaults of Config.
const (
	DefaultMaxAge = 2 * time.Second
	// DefaultMaxLatency bounds the settled transfers' median end-to-end
	// latency (see Config.MaxLatency).
	DefaultMaxLatency = time.Second
	DefaultRefresh    = 250 * time.Millisecond
)

// Tuning of the admitted rate while shedding (see Refresh).
const (
	// startFraction of the rate admitted before the bound was passed is
	// what shedding starts with.
	startFraction = 0.9
	// decrease multiplies the admitted rate at each refresh that finds the
	// backlog over the bound and stalled (see stallGrace).
	decrease = 0.8
	// increase multiplies it at each refresh that finds the backlog under
	// the bound; shedding stops once it reaches the offered rate.
	increase = 1.5
	// drainFraction of the rate the flow settles is the most admitted
	// while over the bound: the backlog drains at the rest.
	drainFraction = 0.8
	// minDrainFraction is the least share of the settled rate admitted
	// while the settled transfers are late: at MaxLatency/minDrainFraction
	// and later.
	minDrainFraction = 0.25
	// keepsUp: a flow settling at least this share of the admitted rate
	// keeps up with it (the moving averages are noisy).
	keepsUp = 0.95
	// recoverFraction of the capacity is what the admitted rate climbs
	// back to by increase, after an outage or a pause left it low.
	recoverFraction = 0.5
	// probeStep of the capacity is added at each refresh under the
	// bound while shedding: the admitted rate probes back up to what the
	// flow takes, linearly, rather than overshooting it.
	probeStep = 0.03
	// probeCeiling times the capacity is the most the probe admits while
	// shedding: what settles shows the results of an admitted rate only a
	// latency later, and a probe free to climb meanwhile builds a queue
	// the median sees late. The capacity follows what settles, so a flow
	// that can take more raises the ceiling as the probe finds it.
	probeCeiling = 1.2
	// settledSmoothing weighs the last refresh's settled rate in its
	// moving average (batches make one window's count noisy).
	settledSmoothing = 0.5
	// outboxSmoothing is the least time constant of the moving averages of
	// what all instances enqueue and what the relay takes (at least twice
	// Config.PublishDelay: the logical relay's rows leave the backlog in
	// one burst a settle).
	outboxSmoothing = time.Second
	// capacityDecay multiplies the capacity estimate at each refresh:
	// the highest settled rate seen lately, forgotten with a half-life of
	// about 70 refreshes (17 s at 250 ms), so that a pause of the flow (a
	// broker's leader election) does not make the door admit next to
	// nothing once it resumes.
	capacityDecay = 0.99
	// minRate is the least admitted rate, per second: shedding never
	// shuts the door.
	minRate = 1.0
	// maxRetryAfter caps Retry-After.
	maxRetryAfter = time.Minute
	// stallGrace is how long nothing may leave the outbox while it holds
	// a backlog before the backlog counts as stalled (beyond
	// Config.PublishDelay): a batch in flight to a slow broker is not a
	// stall.
	stallGrace = time.Second
)

// Config bounds the backlog.
type Config struct {
	// MaxAge is the oldest an outbox event the relay can send may be
	// before new transfers are shed; 0 turns admission control off.
	MaxAge time.Duration
	// MaxPending, if positive, also sheds past this many events the
	// relay can send.
	MaxPending int64
	// MaxLatency, if positive, also sheds while more than half of the
	// transfers settled lately took longer than this from their POST to
	// their result (the end-to-end median; see lateShare and
	// minLateSample).
	MaxLatency time.Duration
	// MaxInFlight, if positive, sheds at once while this many admitted
	// requests are not answered yet (Admit, Done). Beyond the pool's
	// connections a request waits for one, and under a surge that queue,
	// not the outbox, is where the admitted transfers pile up: the commits
	// stay at the rate the database takes, the bounds above see the
	// queue only once it has reached the flow, and the projection's
	// connections wait behind it with everything else.
	MaxInFlight int
	// Refresh is how often the backlog is read; default DefaultRefresh.
	Refresh time.Duration
	// PublishDelay is how late the outbox table learns that an event was
	// published: 0 for the polling relay (it marks each batch once the
	// broker acknowledged it), the settle interval for the logical relay
	// (its rows stay PENDING until the next settle). It is taken off the
	// backlog's age, and an outbox from which nothing leaves that long is
	// not stalled.
	PublishDelay time.Duration
}

// Controller decides whether a new transfer request is admitted.
type Controller struct {
	cfg     Config
	backlog BacklogReader
	now     func() time.Time
	metrics *Metrics
	fair    *auth.Limiter

	mu sync.Mutex
	// shedding is set from a refresh that found the backlog over the bound
	// until the admitted rate is back to the offered rate.
	shedding bool
	// rate is the total admitted rate, per second, while shedding.
	rate float64
	// age is the backlog's age at the last refresh, less PublishDelay:
	// the Retry-After's base.
	age time.Duration
	// leftAt is the last refresh that found the backlog empty or more
	// events gone from the outbox than ever before (Reading.Left above
	// leftHigh, a high-water mark: an insert in flight at one reading
	// moves Left up and back). A backlog from which nothing leaves is
	// stalled.
	leftAt   time.Time
	leftHigh int64
	// Counted since the last refresh: requests offered, admitted, and the
	// clients that sent them; transfers settled, and those of them later
	// than MaxLatency.
	offered, admitted int
	// inFlight counts the requests admitted and not answered (Admit, Done).
	inFlight      int
	settled, late int
	worst         time.Duration // the oldest settled transfer's age
	// latency is the verdict on the settled transfers' latency.
	latency latencyVerdict
	clients map[string]struct{}
	since   time.Time
	// settledRate is the moving average of the settled rate, per second;
	// capacity the highest of it seen lately (see capacityDecay): what the
	// flow takes, the admitted rate's anchor while shedding. admittedRate
	// is the moving average of the admitted rate.
	settledRate, capacity, admittedRate float64
	// enqueued and left are the last reading's counts (see Reading), read
	// once some reading was; enqueuedRate and leftRate their moving
	// averages, per second: what all instances admit, and what the relay
	// takes.
	enqueued, left         int64
	read                   bool
	enqueuedRate, leftRate float64
	// relayCapacity is this instance's share (what it admits of what all
	// enqueue) of the highest rate the relay took lately, forgotten as
	// capacity is.
	relayCapacity float64
}

// New returns a controller reading backlog. now is the clock (time.Now in
// production); metrics may be nil.
func New(cfg Config, backlog BacklogReader, now func() time.Time, metrics *Metrics) *Controller {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Controller{cfg: cfg, backlog: backlog, now: now, metrics: metrics,
		fair: auth.NewLimiter(minRate, 1), clients: map[string]struct{}{}, since: now(), leftAt: now()}
}

// Run refreshes the state every Config.Refresh until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.cfg.MaxAge <= 0 {
		return nil
	}
	periodic.Every(ctx, periodic.Fixed(c.cfg.Refresh), func() { _ = c.Refresh(ctx) })
	return nil
}

// Refresh reads the backlog and updates the decision's state. The flow is
// behind when the oldest event the relay can send is older than MaxAge
// (less PublishDelay; or more than MaxPending wait), or when more than half
// of the transfers settled lately took longer than MaxLatency (a sample of
// at least minLateSample; a refresh that completes none keeps the last
// verdict, up to MaxLatency after it was taken). Behind, shedding starts (at
// startFraction of the rate admitted since the last refresh) and the
// admitted rate is held at most drainFraction of the rate the flow settles
// now (less, down to minDrainFraction, the later the oldest result:
// MaxLatency over its age), and at most drainFraction of this instance's
// share of the most the relay took lately, so that the backlog drains while
// the flow works at its best rate; while the backlog is stalled (no event
// has left the outbox for PublishDelay plus stallGrace: an outage) it falls
// by decrease at each refresh. The backlog, the stall and the relay's rates
// are the database's, so every instance, whether or not its projection
// holds partitions, judges them alike. No longer behind, it grows by
// increase a refresh up to recoverFraction of the capacity (see anchor),
// then by probeStep of it (by increase alone while nothing has settled or
// been taken lately), until it reaches the offered rate, and shedding
// stops. The admitted rate is split evenly among the clients that sent
// requests since the last refresh: each has a token bucket of rate/clients.
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
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	dt := now.Sub(c.since).Seconds()
	if dt <= 0 {
		dt = c.cfg.Refresh.Seconds()
	}
	offered, admitted := float64(c.offered)/dt, float64(c.admitted)/dt
	c.settledRate = settledSmoothing*float64(c.settled)/dt + (1-settledSmoothing)*c.settledRate
	c.capacity = max(c.settledRate, c.capacity*capacityDecay)
	c.admittedRate = settledSmoothing*admitted + (1-settledSmoothing)*c.admittedRate
	if c.read {
		tau := max(outboxSmoothing, 2*c.cfg.PublishDelay).Seconds()
		w := 1 - math.Exp(-dt/tau)
		c.enqueuedRate = w*float64(max(0, b.Enqueued-c.enqueued))/dt + (1-w)*c.enqueuedRate
		c.leftRate = w*float64(max(0, b.Left-c.left))/dt + (1-w)*c.leftRate
	}
	c.enqueued, c.left, c.read = b.Enqueued, b.Left, true
	if c.enqueuedRate >= minRate {
		share := min(1, c.admittedRate/c.enqueuedRate)
		c.relayCapacity = max(c.leftRate*share, c.relayCapacity*capacityDecay)
	} else {
		c.relayCapacity *= capacityDecay
	}
	lateNow, worst := c.latency.judge(now, c.settled, c.late, c.worst, c.cfg.MaxLatency)
	age := max(0, b.OldestAge-c.cfg.PublishDelay)
	// Stalled is judged on the whole outbox, not on its oldest event: one
	// key's events waiting for a retry (a partition's leader election)
	// hold the oldest while the relay publishes the rest, and that is not
	// an outage.
	if b.Left > c.leftHigh || b.OldestAge == 0 {
		c.leftHigh, c.leftAt = max(c.leftHigh, b.Left), now
	}
	stalled := now.Sub(c.leftAt) > c.cfg.PublishDelay+stallGrace
	relayBehind := b.ReadyAge-c.cfg.PublishDelay > c.cfg.MaxAge
	over := age > c.cfg.MaxAge || (c.cfg.MaxPending > 0 && b.Pending > c.cfg.MaxPending) || lateNow
	// The later the results, the larger the backlog behind them: it drains
	// faster (down to minDrainFraction of the settled rate admitted).
	drain := drainFraction
	if lateNow {
		drain = min(drain, max(minDrainFraction, c.cfg.MaxLatency.Seconds()/worst.Seconds()))
	}
	clients := max(1, len(c.clients))
	c.offered, c.admitted, c.settled, c.late, c.worst, c.clients, c.since = 0, 0, 0, 0, 0, map[string]struct{}{}, now
	c.age = age
	// Over the bound there is a backlog, so what settles now is what the
	// flow takes now (less, the more the door itself costs); the capacity
	// is what it took lately, the size of the recovery's steps.
	// Without a latency bound the settled rate is not followed: the
	// outbox bound alone, with the rates below.
	follow := c.cfg.MaxLatency > 0
	flowing := follow && c.settledRate >= minRate
	switch {
	case over:
		if !c.shedding {
			c.shedding, c.rate = true, admitted*startFraction
		} else if stalled {
			c.rate *= decrease
		}
		// Clamped only while the results are late and the flow settles
		// less than the door admits: when it keeps up with what is
		// admitted, or what settles settles in time, the bound is passed
		// for another reason (an old backlog draining, one partition's
		// events waiting for a retry while its leader is elected), and
		// clamping on a settled rate that merely echoes the admitted one,
		// less the waiting partition's share, would ratchet the door shut.
		//
		// Not below minDrainFraction of the flow's capacity lately
		// (anchor) while the flow is not stalled: the projection settles
		// in bursts, and what settles in the first refresh after a surge
		// is what the surge's own queries left the flow, a trickle that
		// recovers as soon as the door sheds; a door clamped to it would
		// stay nearly shut for seconds after.
		if flowing && lateNow && c.settledRate < c.admittedRate*keepsUp {
			floor := 0.0
			if !stalled {
				floor = c.anchor() * minDrainFraction
			}
			c.rate = min(c.rate, max(c.settledRate*drain, floor))
		}
		// The same for the relay, from the database's counts, which every
		// instance reads alike: while it is behind on what it could send
		// (events ready to go older than the bound: it is the bottleneck,
		// not one key's retry) and takes less than all instances enqueue
		// (and is not stalled: that is the decrease's), this
		// instance admits at most drainFraction of its share of the most
		// the relay took lately (relayCapacity). The most, not what it
		// takes now: while one key waits for a retry the relay takes what
		// the door admits less that key's share, and a clamp on that echo
		// would cut the door by that share at every refresh.
		if !stalled && relayBehind && c.relayCapacity >= minRate && c.leftRate < c.enqueuedRate*keepsUp {
			c.rate = min(c.rate, c.relayCapacity*drainFraction)
		}
	case c.shedding:
		capacity := c.anchor()
		switch {
		case !follow || capacity < minRate:
			c.rate *= increase
		case c.rate < capacity*recoverFraction:
			c.rate = min(c.rate*increase, capacity*recoverFraction)
		default:
			c.rate = max(c.rate, min(c.rate+capacity*probeStep, capacity*probeCeiling))
		}
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

// anchor is the capacity the admitted rate recovers towards: the lesser of
// the flow's (what this instance's projection settles) and this
// instance's share of the relay's, or the relay's share alone when the
// projection settles nothing (it holds no partitions, or the flow is
// paused). A projection that holds every partition settles what all
// instances admitted, so its capacity alone would have this instance
// probe towards the whole flow's; the relay's share is read from the
// database, the same for every instance.
func (c *Controller) anchor() float64 {
	switch {
	case c.relayCapacity < minRate:
		return c.capacity
	case c.capacity < minRate:
		return c.relayCapacity
	}
	return min(c.capacity, c.relayCapacity)
}
