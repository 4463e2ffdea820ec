package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/test/background"
)

// The polling relay's backlog is the table's unpublished rows and the age
// of the oldest.
func TestBacklogOfThePollingRelay(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	r := outbox.NewRelay(e.ob, nil, fastRelay("backlog"), testLogger(t), nil)
	ctx := context.Background()
	if b, err := r.Backlog(ctx); err != nil || b != (outbox.Backlog{}) {
		t.Fatalf("empty outbox: backlog %+v, %v; want zero", b, err)
	}
	e.enqueue(t, payload{Key: "a", N: 1}, payload{Key: "b", N: 2}, payload{Key: "a", N: 3})
	if _, err := e.db.Exec(ctx, `UPDATE outbox_event SET enqueued_at = now() - interval '10 seconds' WHERE key = 'b'`); err != nil {
		t.Fatal(err)
	}
	b, err := r.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Pending != 3 || b.OldestAge < 10*time.Second || b.OldestAge > 20*time.Second {
		t.Fatalf("backlog %+v: want 3 pending, the oldest about 10s old", b)
	}
}

// The logical relay's backlog age is the stream's lag: while the broker
// refuses every send, the batch in the sender's hands ages, though the
// rows' own age is no different from a healthy relay's before its settle.
func TestBacklogOfTheLogicalRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	dropSlotOnCleanup(t, e)
	r := newLogical(t, e, &outagePublisher{next: e.writer, open: make(chan struct{})})
	background.Go(t, "logical relay", r.Run)
	waitFor(t, 30*time.Second, "the relay streams", func() (bool, error) { return r.Active(), nil })
	ctx := context.Background()
	if b, err := r.Backlog(ctx); err != nil || b.OldestAge != 0 {
		t.Fatalf("nothing sent yet: backlog %+v, %v; want age 0", b, err)
	}
	e.enqueue(t, payload{Key: "a", N: 1}, payload{Key: "a", N: 2})
	var last outbox.Backlog
	waitFor(t, 30*time.Second, "the stream's lag past 1s", func() (bool, error) {
		b, err := r.Backlog(ctx)
		last = b
		return b.OldestAge > time.Second && b.Pending == 2, err
	})
	t.Logf("backlog while the broker refuses: %+v", last)
}
