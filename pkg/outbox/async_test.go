package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
)

// The relay's own writes (the claim's leases, the marks) commit without
// waiting for the disk or the synchronous standby (outcome.go,
// asyncCommitSQL), while the business transactions that enqueue keep the
// server's synchronous_commit. On a synchronous pair whose standby is held
// behind, a durable commit waits for good; the relay still claims, sends
// and marks, a failed send and the retry after it included. With the
// relay's commits durable, its claim would wait out its bound and fail.
//
// Not parallel: it starts and clones a server of its own.
func TestRelayBookkeepingDoesNotWaitForTheStandby(t *testing.T) {
	pair := cluster.StartPair(t, "", cluster.Sync)
	pair.CreateDB("app")
	ctx := context.Background()
	db := openPlatformDB(ctx, t, pair.Primary().DSN("app", ""), pair.Primary().DSN("app", "async-test"))
	ob := outbox.New(db)
	id := uuid.New()
	body, _ := json.Marshal(payload{Key: "k"})
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx, events.Message{ID: id, AggregateType: "widget", AggregateID: id.String(),
			Topic: "t", Key: "k", Type: "WidgetCreated", Payload: body})
	}); err != nil {
		t.Fatal(err)
	}

	pair.CutReplication()
	// Restored before the pool closes (cleanups run last in, first out):
	// the pool's Close waits for the connection of the durable commit.
	restored := false
	t.Cleanup(func() {
		if !restored {
			pair.RestoreReplication()
		}
	})
	// The setup holds durable commits: this one does not return while the
	// standby is held behind.
	durable := make(chan error, 1)
	go func() {
		_, err := db.Exec(context.WithoutCancel(ctx), `CREATE TABLE durable_probe (x int)`)
		durable <- err
	}()
	returned := func() (bool, string) {
		select {
		case err := <-durable:
			return true, fmt.Sprintf("it returned %v", err)
		default:
			return false, ""
		}
	}
	poll.Never(t, 2*time.Second, "a durable commit with the synchronous standby held behind (the test would show nothing)", returned)

	pub := &failingOnce{}
	relay := outbox.NewRelay(ob, pub, fastRelay("async"), testLogger(t), nil)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The first send fails: claimed, then scheduled for a retry.
	if n, err := relay.PublishBatch(pctx); n != 1 || err != nil {
		t.Fatalf("first PublishBatch = %d, %v; want 1 event claimed, its failure recorded", n, err)
	}
	status := func() string {
		var s string
		if err := db.QueryRow(pctx, `SELECT status || '/' || attempts FROM outbox_event WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := status(); got != "PENDING/1" {
		t.Fatalf("after the failed send the event is %s; want PENDING/1", got)
	}
	// The retry, once due, goes through and is marked.
	poll.True(t, 20*time.Second, "the retry is sent and marked PUBLISHED", func() bool {
		if _, err := relay.PublishBatch(pctx); err != nil {
			t.Fatal(err)
		}
		return status() == "PUBLISHED/1"
	})
	if pub.sent() != 1 {
		t.Fatalf("%d records acknowledged; want 1", pub.sent())
	}
	if ok, state := returned(); ok {
		t.Fatalf("the durable commit returned before the standby was back: %s", state)
	}
	pair.RestoreReplication()
	restored = true
	if err := <-durable; err != nil {
		t.Fatalf("the durable commit, once the standby is back: %v", err)
	}
}

// failingOnce fails its first Publish and acknowledges the others.
type failingOnce struct {
	mu        sync.Mutex
	calls, ok int
}

func (p *failingOnce) Publish(_ context.Context, msgs ...broker.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls == 1 {
		return errors.New("refused for the test")
	}
	p.ok += len(msgs)
	return nil
}

func (p *failingOnce) sent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok
}
