package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupConfig describes a consumer-group member.
type GroupConfig struct {
	Group  string
	Topics []string
	// MaxWait is how long a fetch waits for data; default 250ms.
	MaxWait time.Duration
	// OnRevoked is called when the group takes partitions away (and when
	// the member leaves the group): the last moment to commit what was
	// handled on them, through g.
	OnRevoked func(ctx context.Context, g *Group, revoked map[string][]int32)
	// OnLost is called when partitions were lost without a clean
	// revocation (the member was fenced): committing is pointless.
	OnLost func(ctx context.Context, lost map[string][]int32)
	// OnRebalanceWaiting is called, in a goroutine of its own, when a
	// rebalance waits for the records in hand to be finished.
	OnRebalanceWaiting func()
	// Logger receives the client's warnings and errors (a group it cannot
	// join, a broker it cannot reach); nil: none.
	Logger *slog.Logger
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (a killed process) before it moves its partitions;
	// default DefaultSessionTimeout. A member that stops cleanly leaves
	// the group at once instead.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for a member to
	// finish its records in hand and rejoin before it drops the member;
	// default DefaultRebalanceTimeout.
	RebalanceTimeout time.Duration
}

// Defaults of GroupConfig's group timeouts.
const (
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 60 * time.Second
)

// Group is a consumer-group member, the one every consumer loop of the suite
// reads with (NewGroup). It speaks Record: Poll returns them, Commit takes
// the Offsets after them, Rewind fetches them again.
type Group struct{ cl *kgo.Client }

// NewGroup joins the group gc.Group on gc.Topics with the client settings
// of newGroupClient (kgo.go). The caller closes it, which leaves the group.
func NewGroup(cfg Config, gc GroupConfig) (*Group, error) {
	cl, err := newGroupClient(cfg, gc)
	if err != nil {
		return nil, err
	}
	return &Group{cl: cl}, nil
}

// Poll waits for records, at most max of them (max <= 0: whatever is
// buffered), until ctx ends or the member is closed. Records of a partition
// come in offset order, transaction markers among them (Fetch.Marker). The
// group does not rebalance from the moment Poll returns until
// AllowRebalance: the records in hand stay the member's.
func (g *Group) Poll(ctx context.Context, maxRecords int) Fetch {
	return fetchOf(g.cl.PollRecords(ctx, maxRecords))
}

// AllowRebalance lets a rebalance held since the last Poll go ahead.
func (g *Group) AllowRebalance() { g.cl.AllowRebalance() }

// Rewind makes the next Poll fetch recs again: for each partition of recs,
// from the lowest offset among them.
func (g *Group) Rewind(recs []Record) {
	out := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range recs {
		ps := out[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			out[r.Topic] = ps
		}
		if o, ok := ps[r.Partition]; !ok || r.Offset < o.Offset {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	g.cl.SetOffsets(out)
}

// CommitError is the failed commit of one partition's offset.
type CommitError struct {
	Topic     string
	Partition int32
	Offset    Offset
	Err       error
}

// Commit commits offsets (topic, partition: the offset after the last
// record handled) and waits for the answer. It returns the partitions whose
// commit failed, each with its error: all of them when the request failed.
func (g *Group) Commit(ctx context.Context, offsets map[string]map[int32]Offset) []CommitError {
	eos := make(map[string]map[int32]kgo.EpochOffset, len(offsets))
	for t, ps := range offsets {
		m := make(map[int32]kgo.EpochOffset, len(ps))
		for p, o := range ps {
			m[p] = kgo.EpochOffset{Epoch: o.epoch, Offset: o.At}
		}
		eos[t] = m
	}
	var failed []CommitError
	g.cl.CommitOffsetsSync(ctx, eos, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			for t, ps := range offsets {
				for p, o := range ps {
					failed = append(failed, CommitError{t, p, o, err})
				}
			}
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failed = append(failed, CommitError{t.Topic, p.Partition, offsets[t.Topic][p.Partition], err})
				}
			}
		}
	})
	return failed
}

// Close leaves the group (OnRevoked runs first) and closes the client.
func (g *Group) Close() { g.cl.Close() }

// Errors of Commit that say the group moved on without the member, and the
// broker's timeout; errors.Is tells them.
var (
	ErrRebalanceInProgress error = kerr.RebalanceInProgress
	ErrIllegalGeneration   error = kerr.IllegalGeneration
	ErrUnknownMember       error = kerr.UnknownMemberID
	ErrRequestTimedOut     error = kerr.RequestTimedOut
)

// Offset is a position to commit in a partition: At is the offset of the
// next record to read. It carries the leader epoch of the record before
// it, so that a member of a later leader detects a truncated log.
type Offset struct {
	At    int64
	epoch int32
}

// Less orders offsets of one partition: by leader epoch, then offset.
func (o Offset) Less(p Offset) bool {
	if o.epoch != p.epoch {
		return o.epoch < p.epoch
	}
	return o.At < p.At
}

// Fetch is what one Poll returned.
type Fetch struct {
	// Records are the records fetched, each partition's in offset order,
	// transaction markers included (Marker).
	Records []Record
	// Errors are the partitions whose fetch failed (a broker away); a
	// context that ended is not one.
	Errors []FetchError
	// Closed says the client was closed: no more records come.
	Closed bool
	meta   map[position]recordMeta
}

// FetchError is the failed fetch of one partition.
type FetchError struct {
	Topic     string
	Partition int32
	Err       error
}

type position struct {
	topic     string
	partition int32
	offset    int64
}

type recordMeta struct {
	epoch   int32
	control bool
}

// Marker reports whether r, a record of f, is a transaction marker rather
// than a record anyone wrote: it must never reach a handler, and is
// committed with the records around it.
func (f Fetch) Marker(r Record) bool { return f.meta[position{r.Topic, r.Partition, r.Offset}].control }

// After returns the offset to commit once r, a record of f, and every
// record before it in its partition are handled.
func (f Fetch) After(r Record) Offset {
	m, ok := f.meta[position{r.Topic, r.Partition, r.Offset}]
	if !ok {
		m.epoch = -1
	}
	return Offset{At: r.Offset + 1, epoch: m.epoch}
}

func fetchOf(fs kgo.Fetches) Fetch {
	f := Fetch{Closed: fs.IsClientClosed()}
	fs.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		f.Errors = append(f.Errors, FetchError{topic, partition, err})
	})
	recs := fs.Records()
	if len(recs) == 0 {
		return f
	}
	f.Records = make([]Record, len(recs))
	f.meta = make(map[position]recordMeta, len(recs))
	for i, r := range recs {
		f.Records[i] = recordOf(r)
		f.meta[position{r.Topic, r.Partition, r.Offset}] = recordMeta{epoch: r.LeaderEpoch, control: r.Attrs.IsControl()}
	}
	return f
}

// recordOf converts a franz-go record.
func recordOf(r *kgo.Record) Record {
	out := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Time: r.Timestamp}
	if len(r.Headers) > 0 {
		out.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

func (e FetchError) Error() string {
	return fmt.Sprintf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
}
