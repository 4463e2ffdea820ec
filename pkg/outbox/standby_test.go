package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/poll"
)

// A relay whose database refuses writes as a standby does (SQLSTATE 25006:
// its pool reached a standby, or an old primary fenced read-only) sends
// nothing and changes no event: no attempt counted, nothing dead. Once its
// pool reaches a server that takes writes (the promoted standby), every
// event is sent.
func TestRelayWaitsWhileItsDatabaseIsAStandby(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	ids := e.enqueue(t, payload{"a", 1}, payload{"a", 2}, payload{"b", 3})

	cfg := e.db.Config().Copy()
	var standby atomic.Bool
	standby.Store(true)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if standby.Load() {
			_, err := c.Exec(ctx, `SET default_transaction_read_only = on`)
			return err
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	log := newSendLog()
	startRelay(t, outbox.NewRelay(outbox.New(postgres.Wrap(pool)), log, fastRelay("standby"), testLogger(t), nil))

	poll.Never(t, 2*time.Second, "an event sent or touched while the database is a standby", func() (bool, string) {
		sent := 0
		for _, id := range ids {
			sent += log.sends(id)
		}
		touched := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status <> 'PENDING' OR attempts > 0`)
		return sent > 0 || touched > 0, fmt.Sprintf("%d sends, %d events touched", sent, touched)
	})

	standby.Store(false) // the promotion: new connections take writes
	pool.Reset()
	poll.Until(t, 20*time.Second, "every event sent after the promotion", func() (bool, string) {
		sent := 0
		for _, id := range ids {
			sent += min(log.sends(id), 1)
		}
		return sent == len(ids), fmt.Sprintf("%d of %d sent", sent, len(ids))
	})
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`); n != 0 {
		t.Errorf("%d events dead after the database was a standby", n)
	}
}
