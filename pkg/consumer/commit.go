package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/broker"
)

// Why a commit failed: the reason label of consumer_commit_failures_total.
// The first three are the broker refusing the member's commit because the
// group moved on without it (a rebalance it has not joined, a generation
// it is not part of, a member id it no longer knows): the member took
// longer than the rebalance timeout with the records in hand, or lost its
// session.
const (
	CommitRebalanceInProgress = "rebalance_in_progress"
	CommitIllegalGeneration   = "illegal_generation"
	CommitUnknownMember       = "unknown_member_id"
	// CommitTimeout: no answer within the commit timeout (a broker
	// restarting).
	CommitTimeout = "timeout"
	// CommitOther is any other error.
	CommitOther = "other"
)

// CommitReasons are the known reason label values, created at 0.
var CommitReasons = []string{CommitRebalanceInProgress, CommitIllegalGeneration, CommitUnknownMember, CommitTimeout, CommitOther}

// CommitReason classifies a commit error.
func CommitReason(err error) string {
	switch {
	case errors.Is(err, broker.ErrRebalanceInProgress):
		return CommitRebalanceInProgress
	case errors.Is(err, broker.ErrIllegalGeneration):
		return CommitIllegalGeneration
	case errors.Is(err, broker.ErrUnknownMember):
		return CommitUnknownMember
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, broker.ErrRequestTimedOut):
		return CommitTimeout
	default:
		return CommitOther
	}
}

// commitTimeout bounds one commit.
const commitTimeout = 10 * time.Second

// CommitInterval is how long handled records' offsets may wait to be
// committed: the loop commits when the oldest pending offset is this old,
// when a rebalance waits, when it stops, and when a partition is revoked;
// not after every fetch. A commit is a synchronous broker round trip that
// the next fetch's records waited behind, and an append to
// __consumer_offsets: committed per fetch, with fetches of a record or two,
// the commit requests and the group coordinator (which also serves
// heartbeats) would take a large share of the broker's work. A crash
// loses at most this much of commits, whose records are then handled again, which every handler takes (it is
// idempotent), as it takes a crash between handling and committing.
const CommitInterval = 100 * time.Millisecond

// committer commits the offsets of handled records. An offset whose commit
// fails stays pending: it goes with the next commit, or is committed when
// its partition is revoked (the last moment the member may commit it), so
// that a refused commit does not make the records be handled again while
// the member still owns their partition. Only when the member was fenced
// (its partitions lost, not revoked) are pending offsets dropped: the new
// owner fetches from the committed offset and handles those records again
// (handlers are idempotent). Every failure is logged with its partition
// and offset and counted by reason.
type committer struct {
	log      *slog.Logger // carries the group
	group    string
	failures *prometheus.CounterVec

	mu      sync.Mutex
	pending map[string]map[int32]broker.Offset // next offset to commit
	// since is when pending last became non-empty.
	since time.Time
}

// handled adds the offsets after handled records of fetch to the pending ones, to be
// committed when due (see CommitInterval).
func (c *committer) handled(fetch broker.Fetch, recs []broker.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.add(r.Topic, r.Partition, fetch.After(r))
	}
}

// dueAt returns when the pending offsets are due, and false when none is
// pending.
func (c *committer) dueAt() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since.Add(CommitInterval), len(c.pending) > 0
}

// due reports that pending offsets are due.
func (c *committer) due() bool {
	at, ok := c.dueAt()
	return ok && !time.Now().Before(at)
}

// commit commits what is pending now.
func (c *committer) commit(ctx context.Context, g *broker.Group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return
	}
	offsets := c.pending
	c.pending = nil
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	for _, f := range g.Commit(cctx, offsets) {
		c.failed(ctx, f.Topic, f.Partition, f.Offset, f.Err)
	}
}

// failed records that the commit of offset o on topic/partition failed
// with err and keeps it pending. c.mu is held.
func (c *committer) failed(ctx context.Context, topic string, partition int32, o broker.Offset, err error) {
	reason := CommitReason(err)
	c.failures.WithLabelValues(c.group, reason).Inc()
	c.log.WarnContext(ctx, "kafka commit failed; the offset is retried with the next commit or when the partition is revoked, else its records are handled again",
		"topic", topic, "partition", partition, "offset", o.At, "reason", reason, "err", err)
	c.add(topic, partition, o)
}

// add keeps the highest offset of a partition pending. c.mu is held.
func (c *committer) add(topic string, partition int32, o broker.Offset) {
	if len(c.pending) == 0 {
		c.since = time.Now()
	}
	if c.pending == nil {
		c.pending = map[string]map[int32]broker.Offset{}
	}
	ps := c.pending[topic]
	if ps == nil {
		ps = map[int32]broker.Offset{}
		c.pending[topic] = ps
	}
	if at, ok := ps[partition]; !ok || at.Less(o) {
		ps[partition] = o
	}
}

// onRevoked commits what is pending (not yet due, or left by a failed
// commit) before the partitions go to another member, and before the client
// leaves the group on shutdown.
func (c *committer) onRevoked(ctx context.Context, g *broker.Group, _ map[string][]int32) {
	c.commit(ctx, g)
	c.mu.Lock()
	c.pending = nil // committed, or to be redelivered to the new owner
	c.mu.Unlock()
}

// onLost forgets pending commits: the member was fenced and cannot commit.
func (c *committer) onLost(ctx context.Context, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		c.log.WarnContext(ctx, "partitions lost with offsets not committed: their records are handled again by the next owner",
			"lost", lost)
	}
	c.pending = nil
}
