package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/postgres"
)

// Relay liveness is tied to a database session: each running relay holds a
// session-level advisory lock, pg_advisory_lock(hashtext('outbox_relay'),
// owner), on a connection of its own, and writes owner into the lease_owner
// of every row it leases. When the relay's process dies, its connection
// drops and PostgreSQL releases the lock: from that moment, any claim sees
// the lease's owner holds no lock and takes the rows over, without waiting
// for locked_until. A relay that is alive keeps its lock however slow the
// broker is; its leases then end only at locked_until, which the relay
// never sends past (see Relay.send).
//
// The lock key is drawn at random and taken with pg_try_advisory_lock, so
// two relays of a database never share one.

// livenessLockSQL takes a relay's session lock; false when another relay
// has that key.
const livenessLockSQL = `SELECT pg_try_advisory_lock(hashtext('outbox_relay'), $1)`

// ownerDeadSQL is true when the relay whose liveness key is owner (an int
// expression) holds no session lock: then the claim's transaction gets the
// lock itself (until it commits, which no relay minds: a new relay draws
// another key) and the owner is dead; false when a live relay holds it;
// NULL for a NULL owner (a relay run without a session: time-bound leases
// only). It asks the lock manager for one lock, rather than reading the
// live owners from pg_locks, which copies the whole lock table and walks the
// predicate-lock hash (sized by max_connections) under every lock
// partition's lock, on every claim.
func ownerDeadSQL(owner string) string {
	return "pg_try_advisory_xact_lock(hashtext('outbox_relay'), " + owner + ")"
}

// livenessHeartbeat is how often the liveness connection is checked; a lost
// one is replaced (with a new key) after about this long.
const livenessHeartbeat = 500 * time.Millisecond

// liveness keeps a relay's session lock.
type liveness struct {
	connConfig *pgx.ConnConfig
	log        *slog.Logger
	relay      string
	// key is the owner key while the lock is held, 0 otherwise.
	key atomic.Int32
	// up is closed once the lock was first taken.
	up     chan struct{}
	upOnce atomic.Bool
}

func newLiveness(cfg *pgx.ConnConfig, log *slog.Logger, relay string) *liveness {
	return &liveness{connConfig: cfg, log: log, relay: relay, up: make(chan struct{})}
}

// owner returns the key this relay's leases carry, or nil while the lock is
// not held (claims then take nothing).
func (l *liveness) owner() (int32, bool) {
	k := l.key.Load()
	return k, k != 0
}

// run holds the lock until ctx ends, replacing a lost connection. A loss is
// logged once, not at every reconnection attempt of an outage.
func (l *liveness) run(ctx context.Context) {
	held := false
	for ctx.Err() == nil {
		err := l.hold(ctx, &held)
		l.key.Store(0)
		if ctx.Err() != nil {
			return
		}
		if held {
			l.log.WarnContext(ctx, "outbox relay liveness session lost; its leases are free to other relays, it claims nothing until it has a new one",
				"relay", l.relay, "err", err)
			held = false
		} else {
			l.log.DebugContext(ctx, "outbox relay liveness session not established", "relay", l.relay, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(livenessHeartbeat/2 + rand.N(livenessHeartbeat)):
		}
	}
}

// hold connects, takes a free key and checks the connection until it
// fails or ctx ends. Closing the connection releases the lock.
func (l *liveness) hold(ctx context.Context, held *bool) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.ConnectConfig(cctx, l.connConfig.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx) //nolint:errcheck // the lock goes with the connection either way
	}()
	var key int32
	for range 10 {
		candidate := rand.Int32N(1<<31-1) + 1 // 1..2^31-1: never 0, which means "none"
		var ok bool
		lctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
		err := conn.QueryRow(lctx, livenessLockSQL, candidate).Scan(&ok)
		cancel()
		if err != nil {
			return fmt.Errorf("take liveness lock: %w", err)
		}
		if ok {
			key = candidate
			break
		}
	}
	if key == 0 {
		return fmt.Errorf("no free liveness key after 10 draws")
	}
	l.key.Store(key)
	*held = true
	if l.upOnce.CompareAndSwap(false, true) {
		close(l.up)
	}
	t := time.NewTicker(livenessHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		// A slow answer is not a lost session: only a failed one is. The
		// lock stays held as long as the connection is open.
		pctx, cancel := context.WithTimeout(ctx, 10*livenessHeartbeat)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("ping: %w", err)
		}
	}
}
