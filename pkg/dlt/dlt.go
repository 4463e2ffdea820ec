// Package dlt is the suite's dead-letter library: the Spring Kafka
// dead-letter header format (spring.go), which the consumer loop writes and
// readers decode, and the tooling for dead-letter topics, whichever consumer
// wrote them (the ledger's blocking retries, the notifications' retry
// topics, or a Spring Kafka application, since all use Spring's header
// names): List reads a DLT's records with their headers
// decoded, and Prepare and Replay re-publish chosen records to the main
// topic of their DLT (replay.go). The operator CLI (services/suite/cmd/payments) exposes both as
// "payments dlt list" and "payments dlt replay".
//
// List reads partitions directly, without a consumer group: listing a DLT
// commits nothing and moves no one's offsets. It reads read_committed, as
// every consumer of the suite does (a Spring application may write its DLT
// in a transaction).
package dlt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/paysuite/payments/pkg/broker"
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
	Headers []broker.Header
	// Origin is where the record's headers say it first came from
	// (kafka_dlt-original-*, ClaimedOrigin); Origin.Topic is empty when
	// it has none. A claim: Prepare checks it before any replay.
	Origin Origin
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

// FromRecord decodes a record read from a DLT.
func FromRecord(m broker.Record) Record {
	r := Record{
		Topic:            m.Topic,
		Partition:        int(m.Partition),
		Offset:           m.Offset,
		Time:             m.Time,
		Key:              m.Key,
		Value:            m.Value,
		Headers:          m.Headers,
		ExceptionType:    m.Header(HeaderDLTExceptionFQCN),
		ExceptionMessage: ExceptionMessage(m),
		Attempts:         Attempts(m),
		EventID:          m.Header(events.HeaderEventID),
		EventType:        m.Header(events.HeaderEventType),
		CorrelationID:    m.Header(events.HeaderCorrelationID),
		ReplayedAt:       m.Header(HeaderReplayed),
	}
	r.Origin, _ = ClaimedOrigin(m)
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

func (f Filter) match(m broker.Record) bool {
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
// its end was not reached: records of an aborted transaction whose marker
// lies past the end, say.
const idleTimeout = 5 * time.Second

// List reads the records of f.Topic that match f, from the start of each
// partition (or from f.From) up to the last stable offset the partition had
// when List began, without a consumer group and read_committed: no
// transaction marker, no record of an aborted transaction. Records are
// sorted by time, then partition and offset.
func List(ctx context.Context, cfg broker.Config, f Filter) ([]Record, error) {
	if f.Topic == "" {
		return nil, errors.New("dlt: a topic is required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("dlt: no brokers configured")
	}
	adm, err := broker.NewAdmin(cfg)
	if err != nil {
		return nil, fmt.Errorf("dlt: %w", err)
	}
	defer adm.Close()
	partitions, err := readPartitions(ctx, adm, f.Topic)
	if err != nil {
		return nil, err
	}
	var selected []int32
	for _, p := range partitions {
		if len(f.Partitions) == 0 || slices.Contains(f.Partitions, int(p)) {
			selected = append(selected, p)
		}
	}
	ranges, err := adm.Ranges(ctx, f.Topic, selected, f.From)
	if err != nil {
		return nil, fmt.Errorf("dlt: %w", err)
	}
	if len(f.Offsets) > 0 {
		lo, hi := slices.Min(f.Offsets), slices.Max(f.Offsets)
		for p, r := range ranges {
			ranges[p] = broker.OffsetRange{Start: max(r.Start, lo), End: min(r.End, hi+1)}
		}
	}
	for p, r := range ranges {
		if r.Start >= r.End {
			delete(ranges, p)
		}
	}
	out, err := read(ctx, cfg, f, ranges)
	if err != nil {
		return nil, err
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

// Partitions returns the partition numbers of topic, in order; an error
// when the topic does not exist.
func Partitions(ctx context.Context, cfg broker.Config, topic string) ([]int32, error) {
	adm, err := broker.NewAdmin(cfg)
	if err != nil {
		return nil, fmt.Errorf("dlt: %w", err)
	}
	defer adm.Close()
	return readPartitions(ctx, adm, topic)
}

func readPartitions(ctx context.Context, adm *broker.Admin, topic string) ([]int32, error) {
	ids, err := adm.Partitions(ctx, topic)
	if errors.Is(err, broker.ErrUnknownTopic) {
		return nil, fmt.Errorf("dlt: topic %s does not exist", topic)
	}
	if err != nil {
		return nil, fmt.Errorf("dlt: %w", err)
	}
	return ids, nil
}

// read reads the records of ranges that match f, all partitions at once.
func read(ctx context.Context, cfg broker.Config, f Filter, ranges map[int32]broker.OffsetRange) ([]Record, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	from := make(map[int32]int64, len(ranges))
	for p, r := range ranges {
		from[p] = r.Start
	}
	rd, err := broker.NewPartitionReader(cfg, f.Topic, from)
	if err != nil {
		return nil, fmt.Errorf("dlt: %w", err)
	}
	defer rd.Close()
	open := maps.Clone(ranges) // partitions whose end is not reached
	matches := map[int32]int{}
	var out []Record
	for len(open) > 0 {
		pctx, cancel := context.WithTimeout(ctx, idleTimeout)
		fetch := rd.Poll(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(fetch.Errors) > 0 {
			e := fetch.Errors[0]
			return nil, fmt.Errorf("dlt: read %s/%d: %w", f.Topic, e.Partition, e.Err)
		}
		if len(fetch.Records) == 0 {
			return out, nil // nothing more before the ends: gaps at the tail
		}
		for _, r := range fetch.Records {
			rng, ok := open[r.Partition]
			if !ok {
				continue
			}
			if r.Offset >= rng.End {
				delete(open, r.Partition)
				continue
			}
			if !fetch.Marker(r) && f.match(r) {
				out = append(out, FromRecord(r))
				matches[r.Partition]++
			}
			// Records of a partition come in time order (mostly), so the
			// first Limit matches are the oldest: stop there.
			if r.Offset >= rng.End-1 || (f.Limit > 0 && matches[r.Partition] >= f.Limit && f.To.IsZero()) {
				delete(open, r.Partition)
			}
		}
	}
	return out, nil
}
