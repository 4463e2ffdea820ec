package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	case errors.Is(err, kerr.RebalanceInProgress):
		return CommitRebalanceInProgress
	case errors.Is(err, kerr.IllegalGeneration):
		return CommitIllegalGeneration
	case errors.Is(err, kerr.UnknownMemberID):
		return CommitUnknownMember
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kerr.RequestTimedOut):
		return CommitTimeout
	default:
		return CommitOther
	}
}

// commitTimeout bounds one commit.
const commitTimeout = 10 * time.Second

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
	pending map[string]map[int32]kgo.EpochOffset // next offset to commit
}

// commit commits recs (records handled) together with what is pending.
func (c *committer) commit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.add(r.Topic, r.Partition, kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1})
	}
	if len(c.pending) == 0 {
		return
	}
	offsets := c.pending
	c.pending = nil
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			for t, ps := range offsets {
				for p, o := range ps {
					c.failed(ctx, t, p, o, err)
				}
			}
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					c.failed(ctx, t.Topic, p.Partition, offsets[t.Topic][p.Partition], err)
				}
			}
		}
	})
}

// failed records that the commit of offset o on topic/partition failed
// with err and keeps it pending. c.mu is held.
func (c *committer) failed(ctx context.Context, topic string, partition int32, o kgo.EpochOffset, err error) {
	reason := CommitReason(err)
	c.failures.WithLabelValues(c.group, reason).Inc()
	c.log.WarnContext(ctx, "kafka commit failed; the offset is retried with the next commit or when the partition is revoked, else its records are handled again",
		"topic", topic, "partition", partition, "offset", o.Offset, "reason", reason, "err", err)
	c.add(topic, partition, o)
}

// add keeps the highest offset of a partition pending. c.mu is held.
func (c *committer) add(topic string, partition int32, o kgo.EpochOffset) {
	if c.pending == nil {
		c.pending = map[string]map[int32]kgo.EpochOffset{}
	}
	ps := c.pending[topic]
	if ps == nil {
		ps = map[int32]kgo.EpochOffset{}
		c.pending[topic] = ps
	}
	if at, ok := ps[partition]; !ok || at.Less(o) {
		ps[partition] = o
	}
}

// onRevoked commits what a failed commit left behind before the partitions
// go to another member (and before the client leaves the group on
// shutdown). The loop commits each batch before it allows a rebalance, so
// this is usually nothing.
func (c *committer) onRevoked(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
	c.commit(ctx, cl, nil)
	c.mu.Lock()
	c.pending = nil // committed, or to be redelivered to the new owner
	c.mu.Unlock()
}

// onLost forgets pending commits: the member was fenced and cannot commit.
func (c *committer) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		c.log.WarnContext(ctx, "partitions lost with offsets not committed: their records are handled again by the next owner",
			"lost", lost)
	}
	c.pending = nil
}
