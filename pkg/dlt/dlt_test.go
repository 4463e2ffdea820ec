package dlt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// fixture is a main topic whose consumer dead-letters every record at
// once, the way the suite's consumer loop does it, and the records it
// dead-lettered, in two phases separated by boundary.
type fixture struct {
	cfg      broker.Config
	main     string
	dlt      string
	group    string
	boundary time.Time
	// sent are the records published to the main topic, by event id.
	sent map[string]broker.Record
	// phase1 and phase2 are the event ids published before and after
	// boundary.
	phase1, phase2 []string
	writer         *kafkatest.Writer
}

// newFixture builds the fixture; the consumer loop keeps running until the
// test ends.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	f := &fixture{cfg: cfg, sent: map[string]broker.Record{}}
	f.main = kafkatest.Topic(t, "dlt.test.main", 2)
	f.dlt = events.DLT(f.main)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, cfg, []broker.TopicSpec{{Name: f.dlt, Partitions: 2, ReplicationFactor: 1}}); err != nil {
		t.Fatalf("create DLT: %v", err)
	}
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{f.dlt}})
	})
	f.writer = kafkatest.NewWriter(t, cfg)
	t.Cleanup(func() { _ = f.writer.Close() })

	f.group = kafkatest.Group(t, "dlt-test")
	background.Go(t, "consumer", func(ctx context.Context) error {
		return consumer.Run(ctx, consumer.Config{
			Broker: cfg, Group: f.group, Topics: []string{f.main}, Policy: consumer.BlockingRetries, Publisher: f.writer,
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(context.Context, []broker.Record) error {
				return consumer.Permanent(errors.New("boom: cannot handle"))
			},
		})
	})

	f.phase1 = f.publish(t, "K1", "K1", "K2")
	poll.Until(t, 30*time.Second, "the DLT condition", func() (bool, string) {
		n := len(list(t, cfg, dlt.Filter{Topic: f.dlt}))
		return n == 3, fmt.Sprintf("%d records on the DLT", n)
	})
	// A millisecond-aligned instant after every phase-1 record was written
	// (record times are in milliseconds) and before any phase-2 one.
	f.boundary = time.Now().Truncate(time.Millisecond).Add(time.Millisecond)
	poll.Until(t, 30*time.Second, "the DLT condition", func() (bool, string) { return time.Now().After(f.boundary), "clock before boundary" })
	f.phase2 = f.publish(t, "K1", "K3")
	poll.Until(t, 30*time.Second, "the DLT condition", func() (bool, string) {
		n := len(list(t, cfg, dlt.Filter{Topic: f.dlt}))
		return n == 5, fmt.Sprintf("%d records on the DLT", n)
	})
	return f
}

// publish writes one record per key and returns their event ids.
func (f *fixture) publish(t *testing.T, keys ...string) []string {
	t.Helper()
	var ids []string
	for _, k := range keys {
		id := fmt.Sprintf("ev-%s-%d", k, len(f.sent))
		m := broker.Record{Topic: f.main, Key: []byte(k), Value: []byte(`{"n":` + strconv.Itoa(len(f.sent)) + `}`),
			Headers: []broker.Header{
				{Key: events.HeaderEventID, Value: []byte(id)},
				{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
				{Key: events.HeaderCorrelationID, Value: []byte("corr-" + id)},
			}}
		if err := f.writer.Publish(context.Background(), m); err != nil {
			t.Fatalf("publish: %v", err)
		}
		f.sent[id] = m
		ids = append(ids, id)
	}
	return ids
}

func list(t *testing.T, cfg broker.Config, f dlt.Filter) []dlt.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := dlt.List(ctx, cfg, f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return recs
}

func ids(recs []dlt.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.EventID
	}
	return out
}

func TestDLT(t *testing.T) {
	f := newFixture(t)
	t.Run("List filters", func(t *testing.T) { testListFilters(t, f) })
	t.Run("header decoding", func(t *testing.T) { testHeaders(t, f) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, f) })
}

func testListFilters(t *testing.T, f *fixture) {
	all := list(t, f.cfg, dlt.Filter{Topic: f.dlt})
	byID := map[string]dlt.Record{}
	for _, r := range all {
		byID[r.EventID] = r
	}
	somePartition := byID[f.phase2[0]].Partition
	var onPartition []string
	for _, r := range all {
		if r.Partition == somePartition {
			onPartition = append(onPartition, r.EventID)
		}
	}
	k1 := []string{f.phase1[0], f.phase1[1], f.phase2[0]}
	tests := []struct {
		name   string
		filter dlt.Filter
		want   []string
		sorted bool // want is in time order
	}{
		{name: "everything, oldest first", filter: dlt.Filter{}, want: append(slices.Clone(f.phase1), f.phase2...)},
		{name: "key", filter: dlt.Filter{Key: "K1"}, want: k1},
		{name: "key without records", filter: dlt.Filter{Key: "nobody"}, want: nil},
		{name: "from", filter: dlt.Filter{From: f.boundary}, want: f.phase2},
		{name: "to", filter: dlt.Filter{To: f.boundary}, want: f.phase1},
		{name: "from and key", filter: dlt.Filter{From: f.boundary, Key: "K1"}, want: f.phase2[:1]},
		{name: "range with nothing", filter: dlt.Filter{From: f.boundary.Add(-time.Hour), To: f.boundary.Add(-59 * time.Minute)}, want: nil},
		{name: "from in the future", filter: dlt.Filter{From: time.Now().Add(time.Hour)}, want: nil},
		{name: "limit keeps the oldest", filter: dlt.Filter{Limit: 2}, want: f.phase1[:2], sorted: true},
		{name: "partition", filter: dlt.Filter{Partitions: []int{somePartition}}, want: onPartition},
		{name: "partition and offset", filter: dlt.Filter{Partitions: []int{somePartition}, Offsets: []int64{byID[f.phase2[0]].Offset}},
			want: f.phase2[:1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.filter.Topic = f.dlt
			got := ids(list(t, f.cfg, tt.filter))
			opts := []cmp.Option{cmpopts.EquateEmpty()}
			if !tt.sorted {
				// Records of phase 1 on different partitions may share a
				// millisecond; compare as sets.
				opts = append(opts, cmpopts.SortSlices(func(a, b string) bool { return a < b }))
			}
			if diff := cmp.Diff(tt.want, got, opts...); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("time order", func(t *testing.T) {
		for i := 1; i < len(all); i++ {
			if all[i].Time.Before(all[i-1].Time) {
				t.Errorf("record %d at %s listed after one at %s", i, all[i].Time, all[i-1].Time)
			}
		}
	})
	t.Run("unknown topic", func(t *testing.T) {
		_, err := dlt.List(context.Background(), f.cfg, dlt.Filter{Topic: f.dlt + "-nope"})
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("List(unknown topic) = %v, want a does-not-exist error", err)
		}
	})
}

func testHeaders(t *testing.T, f *fixture) {
	mains := list(t, f.cfg, dlt.Filter{Topic: f.main})
	for _, r := range list(t, f.cfg, dlt.Filter{Topic: f.dlt}) {
		var orig dlt.Record
		for _, m := range mains {
			if m.EventID == r.EventID {
				orig = m
			}
		}
		sent := f.sent[r.EventID]
		want := dlt.Record{
			Topic: f.dlt, Key: sent.Key, Value: sent.Value,
			Origin:        dlt.Origin{Topic: f.main, Partition: orig.Partition, Offset: orig.Offset, Timestamp: orig.Time, Group: f.group},
			ExceptionType: "*errors.errorString", ExceptionMessage: "boom: cannot handle", Attempts: 1,
			EventID: r.EventID, EventType: events.TypeAnalysed, CorrelationID: "corr-" + r.EventID,
		}
		if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(dlt.Record{}, "Partition", "Offset", "Time", "Headers"),
			cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("record %s mismatch (-want +got):\n%s", r.EventID, diff)
		}
	}
}

func testReplay(t *testing.T, f *fixture) {
	recs := list(t, f.cfg, dlt.Filter{Topic: f.dlt, Key: "K1"})
	start := time.Now()
	plan, err := dlt.Prepare(context.Background(), f.cfg, f.dlt, []string{f.main}, recs)
	if err != nil || plan.Target != f.main || plan.Unverified() != 0 {
		t.Fatalf("Prepare = %+v, %v; want 3 verified records to %s", plan, err, f.main)
	}
	n, err := dlt.Replay(context.Background(), f.cfg, nil, plan, dlt.Options{Rate: 20})
	if err != nil || n != 3 {
		t.Fatalf("Replay = %d, %v; want 3, nil", n, err)
	}
	// Three records at 20 per second: two intervals of 50 ms at least.
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("3 records replayed in %s at 20/s, want >= 100ms", d)
	}
	var replayed []dlt.Record
	poll.Until(t, 30*time.Second, "the DLT condition", func() (bool, string) {
		replayed = nil
		for _, r := range list(t, f.cfg, dlt.Filter{Topic: f.main, Key: "K1"}) {
			if r.ReplayedAt != "" {
				replayed = append(replayed, r)
			}
		}
		return len(replayed) == 3, fmt.Sprintf("%d replayed records on the main topic", len(replayed))
	})
	for _, r := range replayed {
		sent := f.sent[r.EventID]
		want := append(slices.Clone(sent.Headers), broker.Header{Key: dlt.HeaderReplayed, Value: []byte(r.ReplayedAt)})
		if diff := cmp.Diff(want, r.Headers); diff != "" {
			t.Errorf("replayed %s headers mismatch (-want +got):\n%s", r.EventID, diff)
		}
		if !bytes.Equal(r.Value, sent.Value) || string(r.Key) != "K1" {
			t.Errorf("replayed %s: key %q value %q, want K1 %q", r.EventID, r.Key, r.Value, sent.Value)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.ReplayedAt); err != nil {
			t.Errorf("replay marker %q: %v", r.ReplayedAt, err)
		}
	}
	// The consumer fails them again: back on the DLT, marked as replays,
	// with the main-topic records of the replay as their origin.
	poll.Until(t, 30*time.Second, "the DLT condition", func() (bool, string) {
		var again int
		for _, r := range list(t, f.cfg, dlt.Filter{Topic: f.dlt, Key: "K1"}) {
			if r.ReplayedAt != "" && r.Origin.Topic == f.main {
				again++
			}
		}
		return again == 3, fmt.Sprintf("%d replays dead-lettered again", again)
	})

	t.Run("record without origin", func(t *testing.T) {
		bad := recs[0]
		bad.Origin = dlt.Origin{}
		p, err := dlt.Prepare(context.Background(), f.cfg, f.dlt, []string{f.main}, []dlt.Record{recs[1], bad})
		if err != nil || p.Unverified() != 1 {
			t.Fatalf("Prepare(no origin) = %+v, %v; want one unverified record", p, err)
		}
		if n, err := dlt.Replay(context.Background(), f.cfg, nil, p, dlt.Options{}); !errors.Is(err, dlt.ErrUnverified) || n != 0 {
			t.Errorf("Replay(no origin) = %d, %v; want 0 and ErrUnverified before sending anything", n, err)
		}
	})
}
