package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// The read_committed contract: whatever the policy and whether records are
// handled one by one or in batches, a handler never sees a transaction
// marker or a record of an aborted transaction, never sees a record that
// follows a transaction still open, and the group's offsets move past every
// marker.

// txnMode is one way of running the consumer.
type txnMode struct {
	name  string
	pc    policyCase
	batch bool
}

var txnModes = []txnMode{
	{name: "blocking", pc: policies[0]},
	{name: "blocking-batch", pc: policies[0], batch: true},
	{name: "retry-topics", pc: policies[1]},
}

func TestReadCommitted(t *testing.T) {
	t.Parallel()
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			t.Run("committed transaction interleaved with plain records", func(t *testing.T) { t.Parallel(); testCommittedTxn(t, mode) })
			t.Run("aborted transactions are skipped", func(t *testing.T) { t.Parallel(); testAbortedTxn(t, mode) })
			t.Run("records wait behind an open transaction", func(t *testing.T) { t.Parallel(); testOpenTxn(t, mode) })
		})
	}
}

// txnFixture is a consumer fixture with a transactional producer and a
// handler that records what it is given.
type txnFixture struct {
	*fixture
	prod *kafkatest.Producer
	rec  *recorder
	mu   sync.Mutex
	bad  []string // records a handler should never have seen
}

func newTxnFixture(t *testing.T, mode txnMode) *txnFixture {
	t.Helper()
	f := &txnFixture{fixture: newFixture(t, mode.pc), prod: kafkatest.NewProducer(t), rec: &recorder{}}
	h := func(_ context.Context, m broker.Record) error {
		v := string(m.Value)
		if !strings.HasPrefix(v, "rec-") {
			f.mu.Lock()
			f.bad = append(f.bad, fmt.Sprintf("%q at offset %d", m.Value, m.Offset))
			f.mu.Unlock()
		}
		f.rec.record(v)
		return nil
	}
	cfg := consumer.Config{
		Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: each(h), Policy: mode.pc.policy,
		Publisher: f.writer,
	}
	if !mode.batch {
		cfg.MaxBatch = 1 // records fetched and handled one at a time
	}
	startMember(t, cfg)
	return f
}

func (f *txnFixture) msgs(values ...string) []kafka.Message {
	out := make([]kafka.Message, len(values))
	for i, v := range values {
		out[i] = kafka.Message{Topic: f.topic, Key: []byte("CC-001"), Value: []byte("rec-" + v), Headers: []kafka.Header{
			{Key: events.HeaderEventID, Value: []byte("id-" + v)},
		}}
	}
	return out
}

func (f *txnFixture) order() []string {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return append([]string(nil), f.rec.order...)
}

// check waits until the group has committed the whole partition, markers
// included, then compares what was handled with want and checks that
// nothing was dead-lettered.
func (f *txnFixture) check(t *testing.T, want ...string) {
	t.Helper()
	waitCommittedToEnd(t, f.group, f.topic)
	var got []string
	for _, v := range f.order() {
		got = append(got, strings.TrimPrefix(v, "rec-"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records handled (-want +got):\n%s", diff)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Errorf("the handler was given records nobody wrote (transaction markers?): %v", f.bad)
	}
	if end := dltEnd(t, f.fixture); end != 0 {
		t.Errorf("DLT holds %d records, want 0", end)
	}
}

// waitCommittedToEnd waits until group's committed offset on partition 0
// of topic is the partition's end: past the last record and marker.
func waitCommittedToEnd(t *testing.T, group, topic string) {
	t.Helper()
	poll.Until(t, 60*time.Second, "the group commits up to the end of the partition", func() (bool, string) {
		o := kafkatest.GroupOffsets(t, group, topic, 0)
		return o.Committed == o.End, fmt.Sprintf("%+v", o)
	})
}

// A committed transaction whose records are interleaved with plain ones on
// the same partition: each record handled once, in log order; no marker
// handled; nothing dead-lettered; the offset moves past the marker.
func testCommittedTxn(t *testing.T, mode txnMode) {
	f := newTxnFixture(t, mode)
	f.prod.Plain(f.msgs("n0")...)
	f.prod.Begin()
	f.prod.InTxn(f.msgs("t1", "t2")...)
	f.prod.Plain(f.msgs("n1")...)
	f.prod.InTxn(f.msgs("t3")...)
	f.prod.Commit()
	f.prod.Plain(f.msgs("n2")...)
	f.prod.Committed(f.msgs("t4")...) // the partition ends with a commit marker
	f.check(t, "n0", "t1", "t2", "n1", "t3", "n2", "t4")
}

// Aborted transactions, one in the middle and one at the end of the
// partition: none of their records is handled, and the committed offset
// moves past both.
func testAbortedTxn(t *testing.T, mode txnMode) {
	f := newTxnFixture(t, mode)
	f.prod.Plain(f.msgs("n0")...)
	f.prod.Aborted(f.msgs("a1", "a2")...)
	f.prod.Plain(f.msgs("n1")...)
	f.prod.Aborted(f.msgs("a3")...)
	f.check(t, "n0", "n1")
}

// A transaction left open holds back every record after it on its
// partition (the last stable offset does not pass it); once it commits,
// its records and those after it are handled in order.
func testOpenTxn(t *testing.T, mode txnMode) {
	f := newTxnFixture(t, mode)
	f.prod.Plain(f.msgs("n0")...)
	f.prod.Begin()
	f.prod.InTxn(f.msgs("t1")...)
	f.prod.Plain(f.msgs("n1")...)
	poll.True(t, 60*time.Second, "n0 handled", func() bool { return f.rec.count("rec-n0") == 1 })
	poll.Never(t, 2*time.Second, "a record behind the open transaction handled", func() (bool, string) {
		o := f.order()
		return len(o) != 1, fmt.Sprint(o)
	})
	if o := kafkatest.GroupOffsets(t, f.group, f.topic, 0); o.Committed > 1 {
		t.Errorf("committed offset %d passed the open transaction at offset 1", o.Committed)
	}
	f.prod.Commit()
	f.check(t, "n0", "t1", "n1")
}

// A dead-lettered record keeps its partition number when the DLT has that
// partition (as Spring's DeadLetterPublishingRecoverer does); otherwise it
// goes where its key hashes.
func TestDeadLetterKeepsThePartition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		dltPartitions int
		// wantSame says whether the DLT record is on the original
		// partition rather than on its key's.
		wantSame bool
	}{
		{name: "DLT with as many partitions", dltPartitions: 3, wantSame: true},
		{name: "DLT with fewer partitions", dltPartitions: 2, wantSame: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
			topic := kafkatest.Topic(t, "consumer-dlt-partition", 3)
			kafkatest.CreateTopic(t, events.DLT(topic), tt.dltPartitions)
			// A key that murmur2 puts on neither partition 2 of the main
			// topic nor partition 2 of the DLT, so both rules differ.
			key := keyAvoiding(t, 2, 3, tt.dltPartitions)
			prod := kafkatest.NewProducer(t)
			prod.Plain(kafka.Message{Topic: topic, Partition: 2, Key: []byte(key), Value: []byte("poison")})
			startMember(t, consumer.Config{ // no Publisher: the consumer's own DLT writer
				Broker: kcfg, Group: kafkatest.Group(t, "dlt-partition"), Topics: []string{topic},
				Handler: func(context.Context, []broker.Record) error { return consumer.Permanent(errTransient) },
			})
			var recs []dlt.Record
			poll.Until(t, 60*time.Second, "the record dead-lettered", func() (bool, string) {
				lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer lcancel()
				var err error
				recs, err = dlt.List(lctx, kcfg, dlt.Filter{Topic: events.DLT(topic)})
				return err == nil && len(recs) == 1, fmt.Sprintf("%d records, %v", len(recs), err)
			})
			want := 2
			if !tt.wantSame {
				want = kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte(key)}, seq(tt.dltPartitions)...)
			}
			if got := recs[0].Partition; got != want {
				t.Errorf("DLT partition = %d, want %d", got, want)
			}
			if recs[0].Origin.Partition != 2 {
				t.Errorf("origin partition header = %d, want 2", recs[0].Origin.Partition)
			}
		})
	}
}

// keyAvoiding returns a key that murmur2 puts on a partition other than p
// among n partitions and among m.
func keyAvoiding(t *testing.T, p, n, m int) string {
	t.Helper()
	for i := range 1000 {
		k := fmt.Sprintf("CC-%03d", i)
		msg := kafka.Message{Key: []byte(k)}
		if (kafka.Murmur2Balancer{}).Balance(msg, seq(n)...) != p && (kafka.Murmur2Balancer{}).Balance(msg, seq(m)...) != p {
			return k
		}
	}
	t.Fatal("no key found")
	return ""
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestReadCommittedOnKfake: the in-process fake broker `make demo` runs on
// serves the consumer's read_committed group fetches too (the contract
// itself is tested on the real broker, TestReadCommitted).
func TestReadCommittedOnKfake(t *testing.T) {
	t.Parallel()
	topic := "kfake.txn"
	brokers := kafkatest.Fake(t, 1, topic, events.DLT(topic))
	prod := kafkatest.NewProducer(t, brokers...)
	msg := func(v string) kafka.Message { return kafka.Message{Topic: topic, Key: []byte("K"), Value: []byte(v)} }
	m := startMember(t, consumer.Config{Broker: broker.Config{Brokers: brokers}, Group: "g", Topics: []string{topic}})
	handled := m.handled

	prod.Plain(msg("n0"))
	prod.Committed(msg("t1"), msg("t2"))
	prod.Aborted(msg("a1"))
	prod.Plain(msg("n1"))
	prod.Begin()
	prod.InTxn(msg("t3"))
	prod.Plain(msg("n2"))
	poll.Until(t, 30*time.Second, "n1 handled", func() (bool, string) {
		h := handled()
		return len(h) > 0 && h[len(h)-1] == "n1", strings.Join(h, ",")
	})
	poll.Never(t, time.Second, "a record behind the open transaction handled", func() (bool, string) {
		h := handled()
		return len(h) > 4, fmt.Sprint(h)
	})
	prod.Commit()
	poll.Until(t, 30*time.Second, "n2 handled", func() (bool, string) {
		h := handled()
		return len(h) > 0 && h[len(h)-1] == "n2", strings.Join(h, ",")
	})
	if diff := cmp.Diff([]string{"n0", "t1", "t2", "n1", "t3", "n2"}, handled()); diff != "" {
		t.Errorf("records handled (-want +got):\n%s", diff)
	}
}
