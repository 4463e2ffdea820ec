package notify_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/notifications/internal/notify"
)

// countingSender answers per event id and counts the sends of each.
type countingSender struct {
	mu      sync.Mutex
	sent    map[uuid.UUID]int
	answers map[uuid.UUID][]error
}

func (*countingSender) Channel() string { return "fake" }

func (c *countingSender) Send(_ context.Context, n notify.Notification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[n.EventID]++
	if as := c.answers[n.EventID]; len(as) > 0 {
		c.answers[n.EventID] = as[1:]
		return as[0]
	}
	return nil
}

func (c *countingSender) sends() map[uuid.UUID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uuid.UUID]int{}
	for k, v := range c.sent {
		out[k] = v
	}
	return out
}

// TestNotifyBatchThenOneByOne notifies a batch in which one send fails,
// then handles the same records one by one, as the consumer loop does
// after a batch error. Every event ends delivered once, the failed one
// after one more attempt; the one delivered before the batch and those
// delivered by the batch are not sent again; the events after the failure
// are not attempted by the batch.
func TestNotifyBatchThenOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore(t)
	var ns []notify.Notification
	for range 7 {
		ns = append(ns, notification())
	}
	sender := &countingSender{sent: map[uuid.UUID]int{}, answers: map[uuid.UUID][]error{
		ns[2].EventID: {notify.ErrNoDestination},
		ns[4].EventID: {errRefused},
	}}
	svc := notify.NewService(store, sender, nil, slog.New(slog.DiscardHandler))
	if err := svc.Notify(ctx, ns[1]); err != nil { // delivered before the batch
		t.Fatal(err)
	}

	if err := svc.NotifyBatch(ctx, ns); err == nil {
		t.Fatal("NotifyBatch with a refused send returned nil")
	}
	wantSends := map[uuid.UUID]int{ns[0].EventID: 1, ns[1].EventID: 1, ns[2].EventID: 1, ns[3].EventID: 1, ns[4].EventID: 1}
	if diff := cmp.Diff(wantSends, sender.sends()); diff != "" {
		t.Errorf("sends after the batch (-want +got):\n%s", diff)
	}
	entry := func(n notify.Notification) notify.Entry {
		e, err := store.Get(ctx, n.EventID)
		if err != nil {
			t.Fatal(err)
		}
		return notify.Entry{Channel: e.Channel, Status: e.Status, Attempts: e.Attempts, LastError: e.LastError}
	}
	want := []notify.Entry{
		{Channel: "fake", Status: notify.StatusDelivered, Attempts: 1},
		{Channel: "fake", Status: notify.StatusDelivered, Attempts: 1},
		{Channel: "fake", Status: notify.StatusNoDestination, Attempts: 1, LastError: notify.ErrNoDestination.Error()},
		{Channel: "fake", Status: notify.StatusDelivered, Attempts: 1},
		{Channel: "fake", Status: notify.StatusFailed, Attempts: 1, LastError: "refused"},
		{Channel: "fake", Status: notify.StatusPending},
		{Channel: "fake", Status: notify.StatusPending},
	}
	var got []notify.Entry
	for _, n := range ns {
		got = append(got, entry(n))
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("log after the batch (-want +got):\n%s", diff)
	}

	for _, n := range ns {
		if err := svc.Notify(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	wantSends = map[uuid.UUID]int{ns[0].EventID: 1, ns[1].EventID: 1, ns[2].EventID: 2, ns[3].EventID: 1,
		ns[4].EventID: 2, ns[5].EventID: 1, ns[6].EventID: 1}
	if diff := cmp.Diff(wantSends, sender.sends()); diff != "" {
		t.Errorf("sends after the one-by-one pass (-want +got):\n%s", diff)
	}
	for i, n := range ns {
		if e := entry(n); e.Status != notify.StatusDelivered {
			t.Errorf("event %d: %+v, want DELIVERED", i, e)
		}
	}
}

// blockingSender holds the first send until released.
type blockingSender struct {
	countingSender
	started  chan struct{}
	release  chan struct{}
	blocking sync.Once
}

func (b *blockingSender) Send(ctx context.Context, n notify.Notification) error {
	first := false
	b.blocking.Do(func() { first = true })
	if first {
		close(b.started)
		<-b.release
	}
	return b.countingSender.Send(ctx, n)
}

// TestNotifyBatchHoldsItsClaims: a delivery of an event of a batch in
// flight waits for the batch and sends nothing.
func TestNotifyBatchHoldsItsClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore(t)
	ns := []notify.Notification{notification(), notification(), notification()}
	sender := &blockingSender{countingSender: countingSender{sent: map[uuid.UUID]int{}},
		started: make(chan struct{}), release: make(chan struct{})}
	svc := notify.NewService(store, sender, nil, slog.New(slog.DiscardHandler))
	batchDone := make(chan error, 1)
	go func() { batchDone <- svc.NotifyBatch(ctx, ns) }()
	<-sender.started
	single := make(chan error, 1)
	go func() { single <- svc.Notify(ctx, ns[2]) }()
	// The single delivery must still be waiting on the claim.
	select {
	case err := <-single:
		t.Fatalf("Notify returned %v while the batch held the claim", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(sender.release)
	if err := <-batchDone; err != nil {
		t.Fatal(err)
	}
	if err := <-single; err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]int{ns[0].EventID: 1, ns[1].EventID: 1, ns[2].EventID: 1}
	if diff := cmp.Diff(want, sender.sends()); diff != "" {
		t.Errorf("sends (-want +got):\n%s", diff)
	}
}
