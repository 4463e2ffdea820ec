package consumer

import (
	"context"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// lagInterval is how often the consumer lag gauge is refreshed.
const lagInterval = 5 * time.Second

// reportLag sets consumer_lag{group, topic, partition} to the partition's
// end offset minus the group's committed offset, as kafka-consumer-groups
// computes it, every lagInterval. Committed offsets (not what the reader
// fetched ahead) are what a stuck handler stops moving, so its lag grows.
func (l *loop) reportLag(ctx context.Context) {
	transport := l.cfg.Broker.Transport() // the configuration's TLS and SASL
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(l.cfg.Broker.Brokers...), Timeout: 5 * time.Second, Transport: transport}
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lags, err := groupLag(qctx, client, l.group, l.topics)
		cancel()
		if err != nil {
			continue // the broker may be away; the gauge keeps its last value
		}
		for tp, lag := range lags {
			l.cfg.Metrics.Lag.WithLabelValues(l.group, tp.topic, strconv.Itoa(tp.partition)).Set(float64(lag))
		}
	}
}

type topicPartition struct {
	topic     string
	partition int
}

// groupLag returns, for every partition of topics, its end offset minus the
// group's committed offset (or minus its first offset when the group has
// committed nothing there).
func groupLag(ctx context.Context, client *kafka.Client, group string, topics []string) (map[topicPartition]int64, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	parts := map[string][]int{}
	ends := map[string][]kafka.OffsetRequest{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			continue
		}
		for _, p := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], p.ID)
			ends[t.Name] = append(ends[t.Name], kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: parts})
	if err != nil {
		return nil, err
	}
	if committed.Error != nil {
		return nil, committed.Error
	}
	offsets, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return nil, err
	}
	bounds := map[topicPartition]kafka.PartitionOffsets{}
	for topic, ps := range offsets.Topics {
		for _, p := range ps {
			if p.Error == nil {
				bounds[topicPartition{topic, p.Partition}] = p
			}
		}
	}
	out := map[topicPartition]int64{}
	for topic, ps := range committed.Topics {
		for _, p := range ps {
			tp := topicPartition{topic, p.Partition}
			b, ok := bounds[tp]
			if !ok || p.Error != nil {
				continue
			}
			from := p.CommittedOffset
			if from < b.FirstOffset {
				from = b.FirstOffset
			}
			out[tp] = max(b.LastOffset-from, 0)
		}
	}
	return out, nil
}
