package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Admin reads the cluster's metadata and offsets: partitions, their first
// and last stable offsets, a group's lag.
type Admin struct{ adm *kadm.Client }

// NewAdmin returns an Admin of cfg. The caller closes it.
func NewAdmin(cfg Config) (*Admin, error) {
	adm, err := NewAdminClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Admin{adm: adm}, nil
}

// Close closes its connections.
func (a *Admin) Close() { a.adm.Close() }

// ErrUnknownTopic is the error of Partitions for a topic that does not
// exist.
var ErrUnknownTopic = errors.New("topic does not exist")

// Partitions returns the partition numbers of topic, in order; an error
// wrapping ErrUnknownTopic when the topic does not exist.
func (a *Admin) Partitions(ctx context.Context, topic string) ([]int32, error) {
	tds, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("read partitions of %s: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) || len(td.Partitions) == 0 {
		return nil, fmt.Errorf("%s: %w", topic, ErrUnknownTopic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("read partitions of %s: %w", topic, td.Err)
	}
	ids := td.Partitions.Numbers()
	slices.Sort(ids)
	return ids, nil
}

// OffsetRange is the offsets [Start, End) of a partition.
type OffsetRange struct{ Start, End int64 }

// Ranges returns, for each of partitions of topic, the offsets a
// read_committed reader can read: from its first offset (or the first
// whose time is at or after from, when from is not zero) to its last
// stable offset.
func (a *Admin) Ranges(ctx context.Context, topic string, partitions []int32, from time.Time) (map[int32]OffsetRange, error) {
	starts, err := a.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("first offsets of %s: %w", topic, err)
	}
	ends, err := a.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets of %s: %w", topic, err)
	}
	var after kadm.ListedOffsets
	if !from.IsZero() {
		// The first offset whose time is >= from, or the end when there
		// is none.
		if after, err = a.adm.ListOffsetsAfterMilli(ctx, from.UnixMilli(), topic); err == nil {
			err = after.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("offsets at %s of %s: %w", from.Format(time.RFC3339), topic, err)
		}
	}
	out := map[int32]OffsetRange{}
	for _, p := range partitions {
		s, ok1 := starts.Lookup(topic, p)
		e, ok2 := ends.Lookup(topic, p)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("no offsets for %s/%d", topic, p)
		}
		r := OffsetRange{s.Offset, e.Offset}
		if at, ok := after.Lookup(topic, p); ok {
			if at.Offset < 0 {
				at.Offset = r.End
			}
			r.Start = max(r.Start, at.Offset)
		}
		out[p] = r
	}
	return out, nil
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// GroupLag returns, for every partition of topics, its last stable offset
// minus group's committed offset (or minus its first offset when the group
// has committed nothing there). Committed offsets, not what a member
// fetched ahead, are what a stuck handler stops moving; the last stable
// offset, not the high watermark, is the end a read_committed consumer can
// reach: records of a transaction still open are not lag yet.
func (a *Admin) GroupLag(ctx context.Context, group string, topics []string) (map[TopicPartition]int64, error) {
	committed, err := a.adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return nil, err
	}
	stable, err := a.adm.ListCommittedOffsets(ctx, topics...)
	if err != nil && !errors.As(err, new(*kadm.ShardErrors)) {
		return nil, err
	}
	starts, err := a.adm.ListStartOffsets(ctx, topics...)
	if err != nil && !errors.As(err, new(*kadm.ShardErrors)) {
		return nil, err
	}
	out := map[TopicPartition]int64{}
	stable.Each(func(end kadm.ListedOffset) {
		if end.Err != nil || end.Partition < 0 {
			return
		}
		start, ok := starts.Lookup(end.Topic, end.Partition)
		if !ok || start.Err != nil {
			return
		}
		from := start.Offset
		if c, ok := committed.Lookup(end.Topic, end.Partition); ok && c.Err == nil && c.At > from {
			from = c.At
		}
		out[TopicPartition{end.Topic, end.Partition}] = max(end.Offset-from, 0)
	})
	return out, nil
}

// PartitionReader reads chosen partitions of a topic from chosen offsets,
// read_committed, without a consumer group: it commits nothing and moves no
// one's offsets.
type PartitionReader struct{ cl *kgo.Client }

// NewPartitionReader returns a reader of topic's partitions, each from its
// offset in from. The caller closes it.
func NewPartitionReader(cfg Config, topic string, from map[int32]int64) (*PartitionReader, error) {
	cl, err := newPartitionClient(cfg, topic, from)
	if err != nil {
		return nil, err
	}
	return &PartitionReader{cl: cl}, nil
}

// Poll waits for records until ctx ends. Transaction markers come among
// them (Fetch.Marker), so a reader can tell it passed the end of a
// partition that ends in one.
func (r *PartitionReader) Poll(ctx context.Context) Fetch { return fetchOf(r.cl.PollFetches(ctx)) }

// Close closes the reader's client.
func (r *PartitionReader) Close() { r.cl.Close() }
