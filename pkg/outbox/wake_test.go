package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysuite/payments/pkg/outbox"
)

// TestRelayWakeUps: with polling out of the picture, each commit of the
// relay's own Outbox wakes the relay, and costs two claims at most (the one
// that takes the event, and the one after the batch that looks for events
// its keys held back); the relay's own NOTIFY wakes nothing. A NOTIFY of
// another Outbox (another process) wakes it too.
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
		waitFor(t, 10*time.Second, "the event sent", func() (bool, error) { return sent(ids[0].String()), nil })
	}
	// Each worker claims once as it starts, and each event's last claim may
	// still be under way.
	if got, most := claims(), float64(2*n+2+2); got > most {
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
	waitFor(t, 10*time.Second, "the event sent after the NOTIFY", func() (bool, error) { return sent(id), nil })
}
