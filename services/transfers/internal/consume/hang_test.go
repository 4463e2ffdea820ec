package consume_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/consume"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestReapplyLoopOnAHungServer: a re-apply pass stuck on a server that
// hangs (its connections open, no answer) fails within
// postgres.CallTimeout and is logged, so that the next pass reconnects;
// once the server answers again, a held result whose transfer became
// visible is applied.
func TestReapplyLoopOnAHungServer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t, migrations.ForService("transfers")...)
	f := fixtureOn(open(t, dsn))
	proxied, proxy := netfault.PostgresURL(t, dsn)
	pdb := open(t, proxied)
	var logs logtest.Buffer
	proj := consume.NewProjection(postgres.NewStore(pdb, outbox.New(pdb), consume.Group, nil, 0), nil, topics,
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proj.ReapplyLoop(ctx, time.Hour, 10*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ReapplyLoop: %v", err)
		}
	})

	id, request := uuid.New(), uuid.New()
	if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, bound(settled(id), request))}); err != nil {
		t.Fatal(err)
	}
	// A few passes finding nothing to do, on fresh connections, before the hang.
	poll.Until(t, 10*time.Second, "three passes on the server", func() (bool, string) {
		n := pdb.Stat().AcquireCount()
		return n >= 3, fmt.Sprintf("%d connections acquired", n)
	})
	proxy.Hang()
	poll.Until(t, pg.CallTimeout+5*time.Second, "the pass on the hung server failed", func() (bool, string) {
		return strings.Contains(logs.String(), "re-apply held results failed"), logs.String()
	})
	proxy.Resume()
	now := time.Now().UTC()
	if _, err := f.store.Create(ctx, transfer.Creation{
		Transfer: transfer.Transfer{ID: id, Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL",
			Status: transfer.StatusPending, Client: "client-a", CreatedAt: now, UpdatedAt: now},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")},
		Event: events.Message{ID: request, AggregateType: transfer.AggregateType, AggregateID: id.String(), Topic: topics.Requested,
			Key: "CC-001", Type: events.TypeRequested, Payload: []byte("{}")},
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the held result applied after the server answered again", func() (bool, string) {
		got, err := f.svc.Get(ctx, id, operator)
		return err == nil && got.Status == transfer.StatusSettled, string(got.Status)
	})
}

// open opens a pool on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *pg.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pg.Open(ctx, dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}
