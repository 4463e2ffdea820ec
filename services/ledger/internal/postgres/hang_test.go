package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/poll"
)

// TestRunExpiryOnAHungServer: a sweep stuck on a server that hangs (its
// connections open, no answer) fails within postgres.CallTimeout and is
// logged, so that the next one reconnects; once the server answers again,
// the sweep releases what fell due.
func TestRunExpiryOnAHungServer(t *testing.T) {
	t.Parallel()
	dsn := ledgertest.NewDSN(t)
	db := ledgertest.OpenDB(t, dsn)
	s := postgres.New(db, outbox.New(db))
	open(t, s, "CC-001", "BRL", 10)
	open(t, s, "CC-002", "BRL", 0)
	settle(t, s, hold("CC-001", "CC-002", 1), hold("CC-001", "CC-002", 1))

	proxied, proxy := netfault.PostgresURL(t, dsn)
	pdb := ledgertest.OpenDB(t, proxied)
	var due atomic.Bool // the clock: before the holds' expiry, then at it
	svc := ledger.NewService(postgres.New(pdb, outbox.New(pdb)), rules, func() time.Time {
		if due.Load() {
			return expiresAt
		}
		return expiresAt.Add(-time.Hour)
	})
	var logs logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunExpiry(ctx, 10*time.Millisecond, 10, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	}()
	t.Cleanup(func() { cancel(); <-done })

	// A few sweeps finding nothing to do, on fresh connections, before the hang.
	poll.Until(t, 10*time.Second, "three sweeps on the server", func() (bool, string) {
		n := pdb.Stat().AcquireCount()
		return n >= 3, fmt.Sprintf("%d connections acquired", n)
	})
	proxy.Hang()
	poll.Until(t, pgplatform.CallTimeout+5*time.Second, "the sweep on the hung server failed", func() (bool, string) {
		return strings.Contains(logs.String(), "expiry sweep failed"), logs.String()
	})
	due.Store(true)
	proxy.Resume()
	poll.Until(t, 15*time.Second, "the reservations released after the server answered again", func() (bool, string) {
		m := moneyOf(t, db, "CC-001")
		return m.Reserved == 0, ""
	})
	ledgertest.CheckInvariants(t, db)
}
