package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
)

// kafka is the broker configuration of the suite's test clients.
func (s *Suite) kafka() broker.Config { return broker.Config{Brokers: s.Brokers} }

// EndOffsets returns, per topic and partition, the offset the next record
// will get (the high watermark).
func (s *Suite) EndOffsets(ctx context.Context, topics ...string) (map[string]map[int]int64, error) {
	adm, err := broker.NewAdminClient(s.kafka())
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	listed, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]int64{}
	for _, t := range topics {
		out[t] = map[int]int64{}
	}
	var ferr error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = errors.Join(ferr, fmt.Errorf("offsets of %s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		out[o.Topic][int(o.Partition)] = o.Offset
	})
	return out, ferr
}

// committed returns group's committed offsets of the partitions of ends
// (-1: none).
func (s *Suite) committed(ctx context.Context, group string, ends map[string]map[int]int64) (map[string]map[int]int64, error) {
	adm, err := broker.NewAdminClient(s.kafka())
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]int64{}
	for t, ps := range ends {
		out[t] = map[int]int64{}
		for p := range ps {
			out[t][p] = -1
			if o, ok := fetched.Lookup(t, int32(p)); ok { //nolint:gosec // partition ids are small
				if o.Err != nil {
					return nil, fmt.Errorf("committed offset of %s/%d: %w", t, p, o.Err)
				}
				out[t][p] = o.At
			}
		}
	}
	return out, nil
}

// WaitCaughtUp takes the end offsets of topics now and waits until group
// has committed up to them: every record written so far has been handled.
// It fails if the group's offsets do not move for stall.
func (s *Suite) WaitCaughtUp(tb testing.TB, stall time.Duration, group string, topics ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ends, err := s.EndOffsets(ctx, topics...)
	cancel()
	if err != nil {
		tb.Fatalf("end offsets of %v: %v", topics, err)
	}
	WhileProgressing(tb, stall, "group "+group+" caught up", func() (bool, int64, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := s.committed(ctx, group, ends)
		if err != nil {
			return false, 0, err.Error()
		}
		var behind []string
		var sum int64
		for t, ps := range ends {
			for p, end := range ps {
				c := got[t][p]
				sum += c
				if c < end && end > 0 {
					behind = append(behind, fmt.Sprintf("%s/%d at %d of %d", t, p, c, end))
				}
			}
		}
		sort.Strings(behind)
		return len(behind) == 0, sum, "behind: " + strings.Join(behind, ", ")
	})
}

// WaitOutboxDrained waits until svc's outbox has nothing left to publish
// (failing if nothing was published for stall), and fails the test if an
// event died there.
func (s *Suite) WaitOutboxDrained(tb testing.TB, stall time.Duration, svc *Service) {
	tb.Helper()
	WhileProgressing(tb, stall, svc.Name+" outbox drained", func() (bool, int64, string) {
		var pending, dead int
		err := svc.DB.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status IN ('PENDING', 'PROCESSING')),
			count(*) FILTER (WHERE status = 'DEAD') FROM outbox_event`).Scan(&pending, &dead)
		if err != nil {
			return false, 0, err.Error()
		}
		if dead > 0 {
			tb.Fatalf("%s outbox: %d DEAD events", svc.Name, dead)
		}
		return pending == 0, int64(-pending), fmt.Sprintf("%d unpublished", pending)
	})
}

// WaitQuiet waits, stage by stage along the flow, until everything
// produced so far has gone all the way through: the transfers outbox is
// published, antifraud has consumed it and published its outbox, the ledger
// likewise, and the projection and the notifications (with their retry
// topics) have consumed every result. After it, a record that was already
// in a topic or an outbox cannot still cause an effect. Each stage fails
// when it makes no progress for stall.
func (s *Suite) WaitQuiet(tb testing.TB, stall time.Duration) {
	tb.Helper()
	t := s.Topics
	s.WaitOutboxDrained(tb, stall, s.Transfers)
	s.WaitCaughtUp(tb, stall, s.Groups.Antifraud, t.Requested)
	s.WaitOutboxDrained(tb, stall, s.Antifraud)
	s.WaitCaughtUp(tb, stall, s.Groups.Ledger, t.Analysed)
	s.WaitOutboxDrained(tb, stall, s.Ledger)
	s.WaitCaughtUp(tb, stall, s.Groups.Projection, t.Settled, t.Rejected)
	s.WaitCaughtUp(tb, stall, s.Groups.Notifications, t.Settled, t.Rejected)
	for _, d := range broker.RetryDelays {
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		s.WaitCaughtUp(tb, stall, s.Groups.Notifications+"-retry-"+ms,
			broker.RetryTopic(t.Settled, d), broker.RetryTopic(t.Rejected, d))
	}
}

// DLTRecords returns how many records each dead-letter topic holds (only
// the non-empty ones).
func (s *Suite) DLTRecords(tb testing.TB) map[string]int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dlts []string
	for _, t := range s.Topics.All() {
		dlts = append(dlts, events.DLT(t))
	}
	ends, err := s.EndOffsets(ctx, dlts...)
	if err != nil {
		tb.Fatalf("DLT offsets: %v", err)
	}
	out := map[string]int64{}
	for t, ps := range ends {
		for _, end := range ps {
			if end > 0 {
				out[t] += end
			}
		}
	}
	return out
}

// ReadTopic returns every committed record topic holds now, from every
// partition (dlt.List reads any topic: from each partition's start to its
// last stable offset, read_committed).
func (s *Suite) ReadTopic(ctx context.Context, topic string) ([]broker.Record, error) {
	recs, err := dlt.List(ctx, s.kafka(), dlt.Filter{Topic: topic})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	out := make([]broker.Record, len(recs))
	for i, r := range recs {
		out[i] = broker.Record{Topic: r.Topic, Partition: int32(r.Partition), Offset: r.Offset, Time: r.Time, //nolint:gosec // a partition number
			Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out, nil
}

// Reproduce writes copies of recs (key, value and headers) to their topic
// again, as a producer retry or a replay would: Kafka delivering the same
// event twice.
func (s *Suite) Reproduce(ctx context.Context, recs []broker.Record) error {
	if len(recs) == 0 {
		return nil
	}
	p, err := broker.NewProducer(s.kafka())
	if err != nil {
		return err
	}
	defer func() { _ = p.Close() }()
	out := make([]broker.Record, len(recs))
	for i, m := range recs {
		out[i] = broker.Record{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: append([]broker.Header(nil), m.Headers...)}
	}
	for range 5 {
		if err = p.Publish(ctx, out...); err == nil {
			return nil
		}
		var perrs broker.PublishErrors
		if !errors.As(err, &perrs) {
			break
		}
		// Only the failed ones again.
		var again []broker.Record
		for i, e := range perrs {
			if e != nil {
				again = append(again, out[i])
			}
		}
		out = again
	}
	return fmt.Errorf("re-produce %d records: %w", len(recs), err)
}
