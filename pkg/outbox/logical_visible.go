package outbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/backoff"
)

// A transaction's commit record reaches the stream before the transaction
// is visible to other sessions: a committing backend writes and flushes
// its commit record, waits (with synchronous_commit on and a synchronous
// standby) for the standby to confirm it, and only then leaves the
// server's list of running transactions. An event sent in that window
// reaches consumers that cannot yet read what its transaction wrote (the
// transfers projection found no transfer for a result and held it), and,
// while a synchronous standby is away, reaches Kafka before any standby
// has the commit, so a failover could lose a transfer whose event already
// moved money. The polling relay cannot do either: it reads the table. So
// the logical relay sends a batch only once every transaction in it is
// visible in a snapshot of the server, which is also when its commit has
// been acknowledged to the client.

// visibleRetry paces the snapshot reads while a transaction is not yet
// visible: a few milliseconds normally, as long as a synchronous standby
// is away otherwise.
var visibleRetry = backoff.Exponential{Initial: time.Millisecond, Multiplier: 2, Max: 100 * time.Millisecond}

// untilVisible waits until every transaction of xids is visible to a new
// snapshot (pg_current_snapshot), reading one snapshot per try. It returns
// an error only when ctx ends.
func (r *LogicalRelay) untilVisible(ctx context.Context, xids []uint32) error {
	began := time.Now()
	warned := false
	for round := 1; len(xids) > 0; round++ {
		var text string
		err := r.untilDB(ctx, func(ctx context.Context) error {
			return r.ob.db.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text)
		})
		if err != nil {
			return err
		}
		snap, err := parseSnapshot(text)
		if err != nil {
			return err
		}
		rest := xids[:0:0]
		for _, x := range xids {
			if !snap.visible(x) {
				rest = append(rest, x)
			}
		}
		if xids = rest; len(xids) == 0 {
			break
		}
		if !warned && time.Since(began) > time.Second {
			warned = true
			r.log.WarnContext(ctx, "outbox logical relay waits for committed transactions to become visible (a synchronous standby away?)",
				"transactions", len(xids), "waited", time.Since(began).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(visibleRetry.Delay(round)):
		}
	}
	if warned {
		r.log.InfoContext(ctx, "outbox logical relay's transactions visible", "waited", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// snapshot is a pg_snapshot: every transaction id below xmin is finished,
// none from xmax on is, and between them those in xip are running.
type snapshot struct {
	xmin, xmax uint64
	xip        map[uint64]bool
}

// parseSnapshot reads pg_snapshot's text form, "xmin:xmax:xip,xip,...".
func parseSnapshot(s string) (snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, fmt.Errorf("parse snapshot %q: want xmin:xmax:xip", s)
	}
	var snap snapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("parse snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("parse snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		ids := strings.Split(parts[2], ",")
		snap.xip = make(map[uint64]bool, len(ids))
		for _, id := range ids {
			x, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				return snapshot{}, fmt.Errorf("parse snapshot %q: %w", s, err)
			}
			snap.xip[x] = true
		}
	}
	return snap, nil
}

// visible reports whether the 32-bit transaction id xid (the stream's) is
// finished in snap. A transaction the stream shows committed, finished,
// is committed.
func (s snapshot) visible(xid uint32) bool {
	full := widenXid(xid, s.xmax)
	return full < s.xmin || (full < s.xmax && !s.xip[full])
}

// widenXid gives xid the epoch that puts it nearest ref (within 2^31),
// as PostgreSQL compares 32-bit transaction ids.
func widenXid(xid uint32, ref uint64) uint64 {
	const wrap = uint64(1) << 32
	full := ref&^(wrap-1) | uint64(xid)
	switch {
	case full > ref && full-ref > wrap/2 && full >= wrap:
		full -= wrap
	case full < ref && ref-full > wrap/2:
		full += wrap
	}
	return full
}
