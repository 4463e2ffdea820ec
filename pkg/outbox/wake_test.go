package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/test/support/poll"
)

// TestRelayWakeUps: with polling out of the picture, each commit of the
// relay's own Outbox wakes the relay, and a commit made while no batch is in
// flight costs one claim: the relay's own NOTIFY wakes nothing, and a
// finished batch looks for events its keys held back only if something was
// committed meanwhile. A NOTIFY of another Outbox (another process) wakes it
// too.
func TestRelayWakeUps(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	m := outbox.NewMetrics(prometheus.NewRegistry())
	pub := newSendLog()
	cfg := fastRelay("wake")
	cfg.PollInterval = time.Hour // every claim comes from a wake-up
	runRelay(t, outbox.NewRelay(e.ob, pub, cfg, testLogger(t), m))
	sent := func(id string) bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return pub.sent[id] > 0
	}
	claims := func() float64 { return relayClaims(t, m) }

	const n = 20
	for i := range n {
		ids := e.enqueue(t, payload{Key: "k", N: i})
		poll.True(t, 10*time.Second, "the event published", func() bool {
			var status string
			if err := e.db.QueryRow(context.Background(), `SELECT status FROM outbox_event WHERE id = $1`, ids[0]).Scan(&status); err != nil {
				t.Fatal(err)
			}
			return status == "PUBLISHED"
		})
	}
	// Each worker claims once as it starts; a batch's end may still race
	// the next commit now and then. Two claims per commit (a wake-up after
	// every batch) would be 42.
	if got, most := claims(), float64(n+n/4+2); got > most {
		t.Errorf("%d events, one per commit: %v claims, want at most %v", n, got, most)
	}

	// A commit through another Outbox, on which no relay runs here, wakes
	// nobody; its NOTIFY does.
	other := *e
	other.ob = outbox.New(e.db)
	id := other.enqueue(t, payload{Key: "k", N: n})[0].String()
	time.Sleep(300 * time.Millisecond)
	if sent(id) {
		t.Fatal("an event of another Outbox was sent before any wake-up: the test shows nothing")
	}
	if _, err := e.db.Exec(context.Background(), `SELECT pg_notify($1, 'another process')`, outbox.DefaultChannel); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the event sent after the NOTIFY", func() bool { return sent(id) })
}

// TestRelayWakesForHeldBackEvents: an event committed while a batch of
// another worker holds its key is skipped by the claim its commit wakes;
// the batch's end wakes a worker for it, with polling out of the picture.
func TestRelayWakesForHeldBackEvents(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	m := outbox.NewMetrics(prometheus.NewRegistry())
	gate := &gatePublisher{}
	cfg := fastRelay("held")
	cfg.PollInterval = time.Hour
	runRelay(t, outbox.NewRelay(e.ob, gate, cfg, testLogger(t), m))
	empty := func() float64 {
		var c dto.Metric
		if err := m.EmptyClaims.Write(&c); err != nil {
			t.Fatal(err)
		}
		return c.GetCounter().GetValue()
	}

	poll.True(t, 10*time.Second, "each worker's first claim", func() bool { return empty() >= 2 })
	e.enqueue(t, payload{Key: "h", N: 1})
	poll.True(t, 10*time.Second, "the first batch in flight", func() bool {
		gate.mu.Lock()
		defer gate.mu.Unlock()
		return gate.calls == 1
	})
	before := empty()
	e.enqueue(t, payload{Key: "h", N: 2})
	poll.True(t, 10*time.Second, "the second event's claim, which skips it", func() bool {
		return empty() > before
	})
	gate.open(t, 0, nil)
	gate.open(t, 1, nil) // fails unless the first batch's end claimed the second event
}

// TestRelayGathersAfterAWakeUp: with a Gather, the worker a commit wakes
// waits before it claims, and the events committed meanwhile (each commit
// waking the relay again) go in the same claim, publish and mark; none of
// them goes out before the gather is over.
func TestRelayGathersAfterAWakeUp(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	m := outbox.NewMetrics(prometheus.NewRegistry())
	pub := newSendLog()
	cfg := fastRelay("gather")
	cfg.PollInterval = time.Hour // every claim comes from a wake-up
	cfg.Workers = 2
	cfg.Gather = 3 * time.Second
	runRelay(t, outbox.NewRelay(e.ob, pub, cfg, testLogger(t), m))
	// Each worker claims once as it starts, without a wake-up.
	poll.True(t, 10*time.Second, "both workers' first claims", func() bool {
		var empty dto.Metric
		if err := m.EmptyClaims.Write(&empty); err != nil {
			t.Fatal(err)
		}
		return empty.GetCounter().GetValue() >= float64(cfg.Workers)
	})

	start := time.Now()
	var ids []string
	for _, k := range []string{"a", "b", "c"} { // three commits, three wake-ups
		for _, id := range e.enqueue(t, payload{Key: k}) {
			ids = append(ids, id.String())
		}
	}
	if took := time.Since(start); took >= cfg.Gather {
		t.Fatalf("the three commits took %v, longer than the gather of %v: the host is too slow for this test", took, cfg.Gather)
	}
	var first time.Duration // when the first of them was acked
	poll.True(t, 10*time.Second, "the first event published", func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		first = time.Since(start)
		return len(pub.order) > 0
	})
	if first < cfg.Gather {
		t.Errorf("an event was published %v after the first commit, before the gather of %v ended", first, cfg.Gather)
	}
	batches := func() *dto.Histogram {
		var b dto.Metric
		if err := m.BatchSize.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.GetHistogram()
	}
	poll.True(t, 10*time.Second, "the three events' batches recorded", func() bool {
		return batches().GetSampleSum() >= float64(len(ids))
	})
	if h := batches(); h.GetSampleCount() != 1 || h.GetSampleSum() != 3 {
		t.Errorf("3 events committed within the gather went in %d batches of %v events in all, want 1 batch of 3",
			h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestRelayNotifiesOtherProcesses: a commit through one Outbox wakes the
// relay of another (another process) by the first relay's NOTIFY: with
// polling out of the picture, the other relay claims after each such
// commit.
func TestRelayNotifiesOtherProcesses(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	claims := func(m *outbox.Metrics) float64 { return relayClaims(t, m) }
	start := func(ob *outbox.Outbox, name string) *outbox.Metrics {
		m := outbox.NewMetrics(prometheus.NewRegistry())
		cfg := fastRelay(name)
		cfg.PollInterval = time.Hour // every claim after the first comes from a wake-up
		cfg.Workers = 1
		runRelay(t, outbox.NewRelay(ob, newSendLog(), cfg, testLogger(t), m))
		poll.True(t, 10*time.Second, name+"'s first claim", func() bool { return claims(m) >= 1 })
		return m
	}
	start(e.ob, "this-process")
	other := *e
	other.ob = outbox.New(e.db)
	m := start(other.ob, "other-process")

	for i := range 3 {
		before := claims(m)
		e.enqueue(t, payload{Key: "n", N: i})
		poll.True(t, 10*time.Second, "the other process's relay woken by the NOTIFY", func() bool { return claims(m) > before })
	}
}

// relayClaims is how many claims a relay made: those that found nothing and
// the batches.
func relayClaims(t *testing.T, m *outbox.Metrics) float64 {
	t.Helper()
	var empty, batches dto.Metric
	if err := m.EmptyClaims.Write(&empty); err != nil {
		t.Fatal(err)
	}
	if err := m.BatchSize.Write(&batches); err != nil {
		t.Fatal(err)
	}
	return empty.GetCounter().GetValue() + float64(batches.GetHistogram().GetSampleCount())
}
