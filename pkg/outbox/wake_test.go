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
	claims := func() float64 {
		var empty, batches dto.Metric
		if err := m.EmptyClaims.Write(&empty); err != nil {
			t.Fatal(err)
		}
		if err := m.BatchSize.Write(&batches); err != nil {
			t.Fatal(err)
		}
		return empty.GetCounter().GetValue() + float64(batches.GetHistogram().GetSampleCount())
	}

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
