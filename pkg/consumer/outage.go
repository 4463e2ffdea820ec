package consumer

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/outage"
)

// Outages are waited out, never dead-lettered. A handler error that says a
// dependency is unavailable (outage.Unavailable: the database unreachable
// or restarting, the pool exhausted, the broker unavailable) would fail
// every record the same way, and the record is not at fault: retrying it a
// bounded number of times and then sending it to the DLT, or forwarding it
// to a retry topic, would dead-letter healthy records during every outage
// longer than the retries. Such an error makes the loop retry the record in
// place without limit, with OutageBackoff, holding its partition (and the
// records behind it) until the dependency is back; only errors that would
// repeat on the same record go through the policy's retries to the DLT.
//
// A handler whose error comes from a remote party it handles by its own
// rule (the notifications' webhook receiver, which retry topics are for)
// wraps it in outage.Exempt.

// OutageBackoff paces the retries of a record while a dependency is
// unavailable: short, so that the flow resumes within a couple of seconds
// of the dependency's return.
var OutageBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 2 * time.Second}

// outageMetrics are the consumer's outage figures.
type outageMetrics struct {
	// Waits counts retries of a record because a dependency was
	// unavailable, by group.
	Waits *prometheus.CounterVec
	// Waiting is 1 while a group's loop waits for a dependency.
	Waiting *prometheus.GaugeVec
}

func newOutageMetrics(f promauto.Factory) outageMetrics {
	return outageMetrics{
		Waits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_dependency_waits_total",
			Help: "Retries of a record because a dependency (database, broker) was unavailable, by group; never dead-lettered."},
			[]string{"group"}),
		Waiting: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "consumer_dependency_waiting",
			Help: "1 while the group's consumer waits for an unavailable dependency, holding its partition."},
			[]string{"group"}),
	}
}

// prime creates the series the alerts watch at 0, for the label values
// known at start: a counter that appears at 1 is invisible to increase().
func (m *Metrics) prime(group string, topics []string, p Policy) {
	groups := []string{group}
	if rt, ok := p.(RetryTopics); ok {
		for _, d := range rt.Delays {
			groups = append(groups, retryGroup(group, d))
		}
	}
	for _, g := range groups {
		m.Outage.Waits.WithLabelValues(g)
		m.Outage.Waiting.WithLabelValues(g)
		for _, r := range CommitReasons {
			m.CommitFailures.WithLabelValues(g, r)
		}
	}
	for _, t := range topics {
		m.DLT.WithLabelValues(t)
	}
	// The retries each loop can count: attempt n of the blocking policy;
	// for retry topics, the loop of level i forwards attempt i+1.
	switch p := p.(type) {
	case Blocking:
		for n := 1; n <= p.Retries; n++ {
			m.Retries.WithLabelValues(group, strconv.Itoa(n))
		}
	case RetryTopics:
		for i := range p.Delays {
			g := group
			if i > 0 {
				g = retryGroup(group, p.Delays[i-1])
			}
			m.Retries.WithLabelValues(g, strconv.Itoa(i+1))
		}
	}
}

// waitOutage is called when the handler failed on m with err. If err is an
// outage, it counts and logs the wait, sleeps the next backoff step and
// returns true (retry m, not counted as an attempt); stopped reports that
// ctx ended meanwhile. Otherwise it returns false and the policy disposes
// of m.
func (l *loop) waitOutage(ctx context.Context, log *slog.Logger, err error, waits *int) (wait, stopped bool) {
	if !outage.Unavailable(err) || IsPermanent(err) {
		if *waits > 0 {
			l.waitOver()
			*waits = 0
		}
		return false, false
	}
	*waits++
	if *waits == 1 {
		l.waiting.Add(1)
	}
	l.cfg.Metrics.Outage.Waits.WithLabelValues(l.group).Inc()
	l.cfg.Metrics.Outage.Waiting.WithLabelValues(l.group).Set(1)
	// One line when the wait starts, then one every 30 retries or so (about
	// a minute at the capped delay): an outage must not flood the log.
	if *waits == 1 || *waits%30 == 0 {
		log.WarnContext(ctx, "a dependency is unavailable; the record waits, its partition holds", "waits", *waits, "err", err)
	}
	if !sleep(ctx, OutageBackoff.Delay(*waits)) {
		return true, true
	}
	return true, false
}

// outageOver records that the record in hand went through after waits.
func (l *loop) outageOver(ctx context.Context, waits int) {
	if waits == 0 {
		return
	}
	l.waitOver()
	l.cfg.Logger.InfoContext(ctx, "the dependency is back; the record went through", "group", l.group, "waits", waits)
}

// waitOver records that one record stopped waiting for a dependency; the
// group's waiting gauge goes to 0 when no partition of this loop waits any
// more (partitions are handled concurrently).
func (l *loop) waitOver() {
	if l.waiting.Add(-1) <= 0 {
		l.cfg.Metrics.Outage.Waiting.WithLabelValues(l.group).Set(0)
	}
}

// retryGroup is the group of the retry topic of delay d (as Run names it).
func retryGroup(group string, d time.Duration) string {
	return group + "-retry-" + strconv.FormatInt(d.Milliseconds(), 10)
}
