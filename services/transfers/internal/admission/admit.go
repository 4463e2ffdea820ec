package admission

import (
	"math"
	"math/rand/v2"
	"time"
)

// Settled tells the controller that transfers created at created have
// just reached their result (the projection calls it after each commit):
// their count is the rate the flow settles, their age its end-to-end
// latency.
func (c *Controller) Settled(created []time.Time) {
	if len(created) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.settled += len(created)
	if c.cfg.MaxLatency > 0 {
		for _, t := range created {
			age := now.Sub(t)
			if age > c.cfg.MaxLatency {
				c.late++
			}
			c.worst = max(c.worst, age)
		}
	}
}

// Admit reports whether client may create a transfer now; when not, it
// also returns the Retry-After to send: the backlog's age (how long the
// flow behind the door takes to catch up, by Little's law), at least a
// second, jittered up to half again so that the refused clients do not
// come back together. A request admitted is in flight until the caller
// calls Done, once it is answered: past Config.MaxInFlight of them the
// next are shed at once, whatever the last refresh found.
func (c *Controller) Admit(client string) (bool, time.Duration) {
	if c.cfg.MaxAge <= 0 {
		return true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offered++
	c.clients[client] = struct{}{}
	if c.cfg.MaxInFlight > 0 && c.inFlight >= c.cfg.MaxInFlight {
		c.metrics.Shed.Inc()
		return false, RetryAfter(c.age)
	}
	ok, wait := true, time.Duration(0)
	if c.shedding {
		ok, wait = c.fair.Allow(client, c.now())
	}
	if !ok {
		c.metrics.Shed.Inc()
		return false, RetryAfter(max(c.age, wait))
	}
	c.admitted++
	c.inFlight++
	return true, 0
}

// Done tells the controller that a request Admit admitted is answered.
func (c *Controller) Done() {
	if c.cfg.MaxAge <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
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
