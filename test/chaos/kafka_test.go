//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/test/support/poll"
)

// partitions lists a topic's partitions.
func partitions(ctx context.Context, c *kafka.Client, topic string) ([]int, error) {
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, t.Error
		}
		out := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			out = append(out, p.ID)
		}
		sort.Ints(out)
		return out, nil
	}
	return nil, fmt.Errorf("topic %s: not in the metadata", topic)
}

// offsets returns the first and end offset of each partition of topic.
// It asks again for up to 30 s (while ctx lasts) when the answer is an
// error: right after a fault a partition whose leader is still moving
// answers "not leader" or "an unexpected server error".
func offsets(ctx context.Context, c *kafka.Client, topic string) (first, end map[int]int64, err error) {
	poll.Wait(30*time.Second, poll.Interval, func() bool {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		first, end, err = offsetsOnce(actx, c, topic)
		return err == nil || ctx.Err() != nil
	})
	return first, end, err
}

// offsetsOnce is one ask of offsets.
func offsetsOnce(ctx context.Context, c *kafka.Client, topic string) (first, end map[int]int64, err error) {
	ps, err := partitions(ctx, c, topic)
	if err != nil {
		return nil, nil, err
	}
	var reqs []kafka.OffsetRequest
	for _, p := range ps {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, nil, err
	}
	first, end = map[int]int64{}, map[int]int64{}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, nil, fmt.Errorf("offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		first[po.Partition], end[po.Partition] = po.FirstOffset, po.LastOffset
	}
	return first, end, nil
}

// readTopic reads every committed record of topic, all partitions.
func readTopic(ctx context.Context, c *kafka.Client, broker, topic string) ([]kafka.Message, error) {
	first, end, err := offsets(ctx, c, topic)
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	for p, last := range end {
		if last <= first[p] {
			continue
		}
		msgs, err := readPartition(ctx, broker, topic, p, first[p], last)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// readPartition reads records [from, end) of one partition. Transaction
// markers take offsets but are not delivered: reading stops at end or when
// nothing more comes for 3 s.
func readPartition(ctx context.Context, broker, topic string, p int, from, end int64) ([]kafka.Message, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p,
		MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 200 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(from); err != nil {
		return nil, err
	}
	var out []kafka.Message
	for {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		m, err := r.ReadMessage(rctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s/%d: %w", topic, p, err)
		}
		out = append(out, m)
		if m.Offset >= end-1 {
			return out, nil
		}
	}
}

// groupLag returns the lag of group on topics, summed, with the per-topic
// detail of any partition that lags.
func groupLag(ctx context.Context, c *kafka.Client, group string, topics []string) (int64, []string, error) {
	var total int64
	var detail []string
	for _, t := range topics {
		_, end, err := offsets(ctx, c, t)
		if err != nil {
			return 0, nil, err
		}
		committed, err := committedOffsets(ctx, c, group, t)
		if err != nil {
			return 0, nil, err
		}
		for p, e := range end {
			if lag := e - committed[p]; lag > 0 { // nothing committed: every record of the partition is lag
				total += lag
				detail = append(detail, fmt.Sprintf("%s %s/%d: committed %d, end %d", group, t, p, committed[p], e))
			}
		}
	}
	sort.Strings(detail)
	return total, detail, nil
}

// committedOffsets returns group's committed offset of each partition of
// topic (0 where it committed none).
func committedOffsets(ctx context.Context, c *kafka.Client, group, topic string) (map[int]int64, error) {
	ps, err := partitions(ctx, c, topic)
	if err != nil {
		return nil, err
	}
	res, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		return nil, fmt.Errorf("committed offsets of %s on %s: %w", group, topic, err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("committed offsets of %s on %s: %w", group, topic, res.Error)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("committed offset of %s %s/%d: %w", group, topic, p.Partition, p.Error)
		}
		out[p.Partition] = max(p.CommittedOffset, 0)
	}
	return out, nil
}
