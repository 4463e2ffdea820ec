// Package dlt is the operators' tooling for the suite's dead-letter topics,
// whichever consumer wrote them (the ledger's blocking retries, the
// notifications' retry topics, or a Spring Kafka application, since all use
// Spring's header names): List reads a DLT's records with their headers
// decoded, and Replay re-publishes chosen records to the topic they came
// from. Command exposes both as the "dlt list" and "dlt replay" CLI.
//
// List reads partitions directly, without a consumer group: listing a DLT
// commits nothing and moves no one's offsets.
package dlt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
)

// Record is one dead-lettered record with its headers decoded.
type Record struct {
	// Topic, Partition, Offset and Time locate the record on the DLT; Time
	// is when it was dead-lettered.
	Topic     string
	Partition int
	Offset    int64
	Time      time.Time
	Key       []byte
	Value     []byte
	// Headers are all the record's headers, as read.
	Headers []kafka.Header
	// Origin is where the record first came from
	// (kafka_dlt-original-*); Origin.Topic is empty when the record has no
	// origin headers, and then it cannot be replayed.
	Origin consumer.Origin
	// ExceptionType and ExceptionMessage say why it was dead-lettered.
	ExceptionType    string
	ExceptionMessage string
	// Attempts is how many times it was handled (retry_topic-attempts, 1
	// without retry topics).
	Attempts int
	// EventID, EventType and CorrelationID are the original event headers.
	EventID       string
	EventType     string
	CorrelationID string
	// ReplayedAt is set when the record was itself a replay that failed
	// again (dlt-replayed-at).
	ReplayedAt string
}

// FromMessage decodes a record read from a DLT.
func FromMessage(m kafka.Message) Record {
	r := Record{
		Topic:            m.Topic,
		Partition:        m.Partition,
		Offset:           m.Offset,
		Time:             m.Time,
		Key:              m.Key,
		Value:            m.Value,
		Headers:          m.Headers,
		ExceptionType:    broker.Header(m, consumer.HeaderDLTExceptionFQCN),
		ExceptionMessage: consumer.ExceptionMessage(m),
		Attempts:         consumer.Attempts(m),
		EventID:          broker.Header(m, events.HeaderEventID),
		EventType:        broker.Header(m, events.HeaderEventType),
		CorrelationID:    broker.Header(m, events.HeaderCorrelationID),
		ReplayedAt:       broker.Header(m, consumer.HeaderReplayed),
	}
	if broker.Header(m, consumer.HeaderDLTOriginalTopic) != "" {
		r.Origin = consumer.OriginOf(m, "")
	}
	return r
}

// Filter selects records of a topic. Zero fields select everything.
type Filter struct {
	// Topic is the DLT to read (any topic can be read); required.
	Topic string
	// From and To bound the record time (when it was dead-lettered):
	// From <= Time < To.
	From, To time.Time
	// Key keeps only records with this key.
	Key string
	// Partitions keeps only these partitions.
	Partitions []int
	// Offsets keeps only these offsets (with Partitions, of those
	// partitions).
	Offsets []int64
	// Limit keeps the oldest Limit matches (by time, partition, offset); 0
	// means no limit.
	Limit int
}

func (f Filter) match(m kafka.Message) bool {
	switch {
	case !f.From.IsZero() && m.Time.Before(f.From),
		!f.To.IsZero() && !m.Time.Before(f.To),
		f.Key != "" && string(m.Key) != f.Key,
		len(f.Offsets) > 0 && !slices.Contains(f.Offsets, m.Offset):
		return false
	}
	return true
}

// idleTimeout ends the read of a partition that returns nothing although
// its end was not reached (a trailing transaction marker, say).
const idleTimeout = 5 * time.Second

// List reads the records of f.Topic that match f, from the start of each
// partition (or from f.From) up to the end the partition had when List
// began, without a consumer group. Records are sorted by time, then
// partition and offset.
func List(ctx context.Context, cfg broker.Config, f Filter) ([]Record, error) {
	if f.Topic == "" {
		return nil, errors.New("dlt: a topic is required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("dlt: no brokers configured")
	}
	dialer := newDialer(cfg)
	partitions, err := readPartitions(ctx, dialer, cfg.Brokers, f.Topic)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, p := range partitions {
		if len(f.Partitions) > 0 && !slices.Contains(f.Partitions, p) {
			continue
		}
		recs, err := listPartition(ctx, cfg, dialer, f, p)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	slices.SortStableFunc(out, func(a, b Record) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return int(a.Offset - b.Offset)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func newDialer(cfg broker.Config) *kafka.Dialer {
	d := cfg.Dialer() // the configuration's TLS and SASL
	d.Timeout, d.ClientID = 10*time.Second, "payments-dlt"
	if cfg.Dial != nil {
		d.DualStack = false
	}
	return d
}

// readPartitions returns the partition ids of topic, asking each broker in
// turn.
func readPartitions(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) ([]int, error) {
	var errs []error
	for _, addr := range brokers {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps, err := conn.ReadPartitions(topic)
		_ = conn.Close()
		if err != nil {
			if errors.Is(err, kafka.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("dlt: topic %s does not exist", topic)
			}
			errs = append(errs, err)
			continue
		}
		ids := make([]int, 0, len(ps))
		for _, p := range ps {
			if p.Topic == topic {
				ids = append(ids, p.ID)
			}
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("dlt: topic %s does not exist", topic)
		}
		slices.Sort(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("dlt: read partitions of %s: %w", topic, errors.Join(errs...))
}

// bounds returns the offsets to read in a partition: [start, end).
func bounds(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int, from time.Time) (start, end int64, err error) {
	var errs []error
	for _, addr := range brokers {
		conn, err := d.DialLeader(ctx, "tcp", addr, topic, partition)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer func() { _ = conn.Close() }()
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		first, last, err := conn.ReadOffsets()
		if err != nil {
			return 0, 0, fmt.Errorf("dlt: offsets of %s/%d: %w", topic, partition, err)
		}
		start = first
		if !from.IsZero() && last > first {
			// The first offset whose time is >= from; Kafka answers -1
			// when there is none.
			at, err := conn.ReadOffset(from)
			if err != nil {
				return 0, 0, fmt.Errorf("dlt: offset at %s of %s/%d: %w", from.Format(time.RFC3339), topic, partition, err)
			}
			switch {
			case at < 0 || at > last:
				start = last
			case at > first:
				start = at
			}
		}
		return start, last, nil
	}
	return 0, 0, fmt.Errorf("dlt: leader of %s/%d: %w", topic, partition, errors.Join(errs...))
}

func listPartition(ctx context.Context, cfg broker.Config, d *kafka.Dialer, f Filter, partition int) ([]Record, error) {
	start, end, err := bounds(ctx, d, cfg.Brokers, f.Topic, partition, f.From)
	if err != nil {
		return nil, err
	}
	if start >= end {
		return nil, nil
	}
	if len(f.Offsets) > 0 {
		lo, hi := slices.Min(f.Offsets), slices.Max(f.Offsets)
		start, end = max(start, lo), min(end, hi+1)
		if start >= end {
			return nil, nil
		}
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     cfg.Brokers,
		Topic:       f.Topic,
		Partition:   partition,
		Dialer:      d,
		MinBytes:    1,
		MaxBytes:    10 << 20,
		MaxWait:     250 * time.Millisecond,
		MaxAttempts: 3,
	})
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(start); err != nil {
		return nil, fmt.Errorf("dlt: seek %s/%d to %d: %w", f.Topic, partition, start, err)
	}
	var out []Record
	for {
		rctx, cancel := context.WithTimeout(ctx, idleTimeout)
		m, err := r.FetchMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return out, nil // nothing more before end: gaps at the tail
			}
			return nil, fmt.Errorf("dlt: read %s/%d: %w", f.Topic, partition, err)
		}
		if m.Offset >= end {
			return out, nil
		}
		if f.match(m) {
			out = append(out, FromMessage(m))
			// Records of a partition come in time order (mostly), so the
			// first Limit matches are the oldest: stop there.
			if f.Limit > 0 && len(out) >= f.Limit && f.To.IsZero() {
				return out, nil
			}
		}
		if m.Offset >= end-1 {
			return out, nil
		}
	}
}

// replayedHeader reports whether a header is dropped on replay: the
// dead-letter and retry bookkeeping of the failed attempts, and an earlier
// replay marker.
func replayedHeader(key string) bool {
	return strings.HasPrefix(key, "kafka_dlt-") || strings.HasPrefix(key, "retry_topic-") ||
		strings.HasPrefix(key, "kafka_exception-") || key == consumer.HeaderReplayed
}

// ReplayMessage is the record Replay publishes for r: r's key and value, to
// its original topic, with its original headers (without the kafka_dlt-*
// and retry_topic-* ones) plus the replay marker. It fails when r has no
// origin.
func ReplayMessage(r Record, at time.Time) (kafka.Message, error) {
	if r.Origin.Topic == "" {
		return kafka.Message{}, fmt.Errorf("dlt: %s/%d@%d has no %s header: cannot tell where to replay it",
			r.Topic, r.Partition, r.Offset, consumer.HeaderDLTOriginalTopic)
	}
	if r.Origin.Topic == r.Topic {
		return kafka.Message{}, fmt.Errorf("dlt: %s/%d@%d: origin is the DLT itself", r.Topic, r.Partition, r.Offset)
	}
	m := kafka.Message{Topic: r.Origin.Topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if !replayedHeader(h.Key) {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	m.Headers = append(m.Headers, kafka.Header{Key: consumer.HeaderReplayed, Value: []byte(at.UTC().Format(time.RFC3339Nano))})
	return m, nil
}

// Replay publishes records, in order, each to its original topic (see
// ReplayMessage), waiting for each acknowledgement, at most rate records
// per second (rate <= 0: no bound). A nil pub uses a writer of cfg
// (broker.NewWriter), closed before returning. It returns how many records
// were published; it stops at the first failure. Every record is checked
// before the first is sent.
func Replay(ctx context.Context, cfg broker.Config, pub consumer.Publisher, records []Record, rate float64) (int, error) {
	for _, r := range records {
		if _, err := ReplayMessage(r, time.Now()); err != nil {
			return 0, err
		}
	}
	if pub == nil {
		w := broker.NewWriter(cfg)
		defer func() { _ = w.Close() }() // every write was acknowledged
		pub = w
	}
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
	}
	for i, r := range records {
		if i > 0 && tick != nil {
			select {
			case <-ctx.Done():
				return i, ctx.Err()
			case <-tick:
			}
		}
		m, _ := ReplayMessage(r, time.Now())
		if err := pub.WriteMessages(ctx, m); err != nil {
			return i, fmt.Errorf("dlt: replay %s/%d@%d to %s: %w", r.Topic, r.Partition, r.Offset, m.Topic, err)
		}
	}
	return len(records), nil
}
