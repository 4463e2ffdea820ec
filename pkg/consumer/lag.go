package consumer

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/periodic"
)

// lagInterval is how often the consumer lag gauge is refreshed.
const lagInterval = 5 * time.Second

// reportLag sets consumer_lag{group, topic, partition} to the partition's
// last stable offset minus the group's committed offset every lagInterval.
// Committed offsets (not what the client fetched ahead) are what a stuck
// handler stops moving, so its lag grows. The last stable offset, not the
// high watermark, is the end a read_committed consumer can reach: records
// of a transaction still open are not lag yet.
func (l *loop) reportLag(ctx context.Context) {
	adm, err := broker.NewAdminClient(l.cfg.Broker)
	if err != nil {
		l.cfg.Logger.WarnContext(ctx, "no consumer lag metric", "group", l.group, "err", err)
		return
	}
	defer adm.Close()
	periodic.Every(ctx, periodic.Fixed(lagInterval), func() {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lags, err := groupLag(qctx, adm, l.group, l.topics)
		cancel()
		if err != nil {
			return // the broker may be away; the gauge keeps its last value
		}
		for tp, lag := range lags {
			l.cfg.Metrics.Lag.WithLabelValues(l.group, tp.topic, strconv.Itoa(tp.partition)).Set(float64(lag))
		}
	})
}

type topicPartition struct {
	topic     string
	partition int
}

// groupLag returns, for every partition of topics, its last stable offset
// minus the group's committed offset (or minus its first offset when the
// group has committed nothing there).
func groupLag(ctx context.Context, adm *kadm.Client, group string, topics []string) (map[topicPartition]int64, error) {
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return nil, err
	}
	stable, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil && !errors.As(err, new(*kadm.ShardErrors)) {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil && !errors.As(err, new(*kadm.ShardErrors)) {
		return nil, err
	}
	out := map[topicPartition]int64{}
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
		out[topicPartition{end.Topic, int(end.Partition)}] = max(end.Offset-from, 0)
	})
	return out, nil
}
