package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// The consumer error-handling contract: the same suite runs against every
// policy, so the ledger's blocking retries and the notifications' retry
// topics keep the same promises.
type policyCase struct {
	name   string
	policy consumer.Policy
	// attempts is how many times a record that always fails is handled.
	attempts int
	// blocksPartition says whether later records of the partition wait for
	// a failing one.
	blocksPartition bool
	// minSpan is the least time between the first and the last attempt.
	minSpan time.Duration
}

var policies = []policyCase{
	{
		name:     "blocking",
		policy:   consumer.Blocking{Backoff: backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 300 * time.Millisecond}, Retries: 3},
		attempts: 4, blocksPartition: true, minSpan: 100*time.Millisecond + 200*time.Millisecond + 300*time.Millisecond,
	},
	{
		name:     "retry-topics",
		policy:   consumer.RetryTopics{Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}},
		attempts: 4, blocksPartition: false, minSpan: 1400 * time.Millisecond,
	},
}

type fixture struct {
	kcfg   broker.Config
	topic  string
	group  string
	writer *kafkatest.Writer
}

func newFixture(t *testing.T, pc policyCase) *fixture {
	t.Helper()
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-"+pc.name, 1)
	kafkatest.CreateTopic(t, events.DLT(topic), 1)
	if rt, ok := pc.policy.(consumer.RetryTopics); ok {
		for _, d := range rt.Delays {
			kafkatest.CreateTopic(t, broker.RetryTopic(topic, d), 1)
		}
	}
	w := kafkatest.NewWriter(t, kcfg)
	t.Cleanup(func() { w.Close() })
	return &fixture{kcfg: kcfg, topic: topic, group: kafkatest.Group(t, pc.name), writer: w}
}

func (f *fixture) produce(t *testing.T, values ...string) {
	t.Helper()
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Topic: f.topic, Key: []byte("CC-001"), Value: []byte(v), Headers: []kafka.Header{
			{Key: events.HeaderEventID, Value: []byte("id-" + v)},
			{Key: events.HeaderEventType, Value: []byte("Test")},
			{Key: events.HeaderCorrelationID, Value: []byte("corr-" + v)},
		}}
	}
	if err := f.writer.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// recorder records handler calls.
type recorder struct {
	mu    sync.Mutex
	calls map[string][]time.Time
	order []string
}

func (r *recorder) record(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string][]time.Time{}
	}
	r.calls[v] = append(r.calls[v], time.Now())
	r.order = append(r.order, v)
}

func (r *recorder) count(v string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls[v])
}

func (r *recorder) times(v string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.calls[v]...)
}

func (f *fixture) run(t *testing.T, pc policyCase, h func(context.Context, broker.Record) error) (stop func()) {
	t.Helper()
	m := startMember(t, consumer.Config{
		Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: each(h), Policy: pc.policy,
		Publisher: f.writer,
	})
	return func() { m.stop(t) }
}

func readDLT(t *testing.T, f *fixture, want int) []broker.Record {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: f.kcfg.Brokers, Topic: events.DLT(f.topic), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []broker.Record
	for len(out) < want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read DLT: got %d of %d: %v", len(out), want, err)
		}
		out = append(out, kafkatest.Record(m))
	}
	return out
}

// dltEnd returns the end offset of partition 0 of f's DLT.
func dltEnd(t *testing.T, f *fixture) int64 {
	t.Helper()
	return lastOffset(t, f, events.DLT(f.topic))
}

func TestConsumerContract(t *testing.T) {
	t.Parallel()
	for _, pc := range policies {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("commits handled records", func(t *testing.T) { t.Parallel(); testCommits(t, pc) })
			t.Run("failing record is retried then dead-lettered", func(t *testing.T) { t.Parallel(); testRetryThenDLT(t, pc) })
			t.Run("poison record goes to the DLT at once", func(t *testing.T) { t.Parallel(); testPoison(t, pc) })
			t.Run("recovers after transient failures", func(t *testing.T) { t.Parallel(); testRecovers(t, pc) })
			t.Run("waits out a database outage", func(t *testing.T) { t.Parallel(); testWaitsOutDatabaseOutage(t, pc) })
			t.Run("waits out a database on a standby", func(t *testing.T) { t.Parallel(); testWaitsOutReadOnlyDatabase(t, pc) })
			t.Run("a batch stopped part way keeps its prefix and goes on as a batch", func(t *testing.T) { t.Parallel(); testBatchStopsPartWay(t, pc) })
			t.Run("a plain error stops the batch at its first record", func(t *testing.T) { t.Parallel(); testBatchPlainError(t, pc) })
			t.Run("a batch of one is the single record", func(t *testing.T) { t.Parallel(); testBatchOfOne(t, pc) })
		})
	}
}

// Handled records are committed: a consumer started again in the same group
// gets none of them again.
func testCommits(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "a", "b", "c")
	rec := &recorder{}
	stop := f.run(t, pc, func(_ context.Context, m broker.Record) error { rec.record(string(m.Value)); return nil })
	poll.True(t, 60*time.Second, "three records handled", func() bool { return rec.count("c") == 1 })
	stop()
	if diff := cmp.Diff([]string{"a", "b", "c"}, rec.order); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	f.produce(t, "d")
	rec2 := &recorder{}
	f.run(t, pc, func(_ context.Context, m broker.Record) error { rec2.record(string(m.Value)); return nil })
	poll.True(t, 60*time.Second, "the new record handled", func() bool { return rec2.count("d") == 1 })
	if diff := cmp.Diff([]string{"d"}, rec2.order); diff != "" {
		t.Fatalf("after restart (-want +got):\n%s", diff)
	}
}

// A record that always fails is handled the policy's number of times with
// the policy's delays, then lands on the DLT with its original headers and
// the DLT headers; the next record of its partition is then processed (for a
// non-blocking policy, meanwhile).
func testRetryThenDLT(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "bad", "next")
	rec := &recorder{}
	var nextAt time.Time
	var mu sync.Mutex
	f.run(t, pc, func(_ context.Context, m broker.Record) error {
		v := string(m.Value)
		rec.record(v)
		if v == "bad" {
			return fmt.Errorf("downstream unavailable: %w", errTransient)
		}
		mu.Lock()
		nextAt = time.Now()
		mu.Unlock()
		return nil
	})
	dead := readDLT(t, f, 1)[0]
	calls := rec.times("bad")
	if len(calls) != pc.attempts {
		t.Fatalf("bad handled %d times, want %d", len(calls), pc.attempts)
	}
	// Due times travel as whole milliseconds (the Spring header format), so
	// each delay may end up to a millisecond early.
	slack := time.Duration(pc.attempts) * time.Millisecond
	if span := calls[len(calls)-1].Sub(calls[0]); span < pc.minSpan-slack {
		t.Errorf("attempts spanned %v, want at least %v", span, pc.minSpan-slack)
	}
	poll.True(t, 30*time.Second, "next handled", func() bool { return rec.count("next") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if pc.blocksPartition && nextAt.Before(calls[len(calls)-1]) {
		t.Errorf("blocking policy handled the next record before the failing one was disposed of")
	}
	if !pc.blocksPartition && !nextAt.Before(calls[1]) {
		t.Errorf("non-blocking policy held the next record (at %v) behind the failing one's retry (at %v)", nextAt, calls[1])
	}
	got := map[string]string{}
	for _, k := range []string{events.HeaderEventID, events.HeaderEventType, events.HeaderCorrelationID,
		dlt.HeaderDLTOriginalTopic, dlt.HeaderDLTOriginalGroup, dlt.HeaderDLTExceptionFQCN} {
		got[k] = kafkatest.Header(dead, k)
	}
	want := map[string]string{
		events.HeaderEventID: "id-bad", events.HeaderEventType: "Test", events.HeaderCorrelationID: "corr-bad",
		dlt.HeaderDLTOriginalTopic: f.topic, dlt.HeaderDLTOriginalGroup: f.group,
		dlt.HeaderDLTExceptionFQCN: "*consumer_test.transientError",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DLT headers (-want +got):\n%s", diff)
	}
	origin, _ := dlt.ClaimedOrigin(dead)
	if origin.Offset != 0 || origin.Partition != 0 || origin.Timestamp.IsZero() {
		t.Errorf("origin = %+v, want offset 0 partition 0 and a timestamp", origin)
	}
	if msg := dlt.ExceptionMessage(dead); msg != "downstream unavailable: transient" {
		t.Errorf("exception message = %q", msg)
	}
	if string(dead.Key) != "CC-001" || string(dead.Value) != "bad" {
		t.Errorf("DLT record key/value = %q/%q", dead.Key, dead.Value)
	}
}

type transientError struct{}

func (*transientError) Error() string { return "transient" }

var errTransient error = &transientError{}

// A poison record (decoding error) is handled once and dead-lettered at
// once; the partition moves on.
func testPoison(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "poison", "after")
	rec := &recorder{}
	f.run(t, pc, func(_ context.Context, m broker.Record) error {
		rec.record(string(m.Value))
		if string(m.Value) == "poison" {
			var e events.Settled
			return events.Decode(m.Value, &e)
		}
		return nil
	})
	dead := readDLT(t, f, 1)[0]
	poll.True(t, 30*time.Second, "after handled", func() bool { return rec.count("after") == 1 })
	if n := rec.count("poison"); n != 1 {
		t.Errorf("poison handled %d times, want 1", n)
	}
	if string(dead.Value) != "poison" || dlt.Attempts(dead) != 1 {
		t.Errorf("DLT record = %q (attempts %d)", dead.Value, dlt.Attempts(dead))
	}
}

// A record that fails twice and then succeeds is handled three times and
// never reaches the DLT.
func testRecovers(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "flaky")
	rec := &recorder{}
	f.run(t, pc, func(_ context.Context, m broker.Record) error {
		rec.record(string(m.Value))
		if rec.count("flaky") <= 2 {
			return errors.New("flaky " + strconv.Itoa(rec.count("flaky")))
		}
		return nil
	})
	poll.True(t, 30*time.Second, "third attempt", func() bool { return rec.count("flaky") == 3 })
	if end := dltEnd(t, f); end != 0 {
		t.Errorf("DLT holds %d records, want 0", end)
	}
}

func TestBackoffDelays(t *testing.T) {
	t.Parallel()
	b := consumer.BlockingRetries.Backoff
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, b.Delay(n))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ledger backoff (-want +got):\n%s", diff)
	}
}

// A batch that stops part way (consumer.BatchFailure) is not handled again
// from its start: the records it finished are not handed to the handler
// again, the one it attempted counts that attempt (with retry topics it
// goes straight to the first retry topic, never to the handler again at
// level 0), and the records after it go on as a batch. The test fails if
// the loop ignores BatchFailure.
func TestBatchFailureKeepsTheBatchAttempt(t *testing.T) {
	t.Parallel()
	pc := policies[1] // retry topics
	f := newFixture(t, pc)
	f.produce(t, "a", "bad", "c")

	var (
		mu      sync.Mutex
		batches [][]string
		calls   []string // handler calls of one record: value@topic-level
	)
	handler := func(_ context.Context, ms []broker.Record) error {
		mu.Lock()
		defer mu.Unlock()
		level := "main"
		if ms[0].Topic != f.topic {
			level = "retry"
		}
		var vs []string
		for _, m := range ms {
			vs = append(vs, string(m.Value))
		}
		batches = append(batches, vs)
		if len(ms) == 1 {
			calls = append(calls, vs[0]+"@"+level)
		}
		for i, m := range ms {
			if string(m.Value) == "bad" && level == "main" {
				return &consumer.BatchFailure{Handled: i, Err: errors.New("receiver down")}
			}
		}
		return nil // the receiver is back by the retry
	}
	cfg := consumer.Config{
		Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Handler: handler, Policy: pc.policy,
		Publisher: f.writer, MaxBatch: 10,
	}
	m := startMember(t, cfg)
	poll.True(t, 30*time.Second, "c handled, and the failed record from its retry topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(calls, "bad@retry") && slices.Contains(calls, "c@main")
	})
	m.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(batches) == 0 || len(batches[0]) < 2 || batches[0][0] != "a" {
		t.Fatalf("batches %v: a and bad were not fetched as one batch", batches)
	}
	// Without BatchFailure the loop would hand a and bad to the handler
	// again at level 0 ("a@main", "bad@main").
	want := []string{"bad@retry", "c@main"}
	got := slices.Sorted(slices.Values(calls))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handler calls of one record (-want +got):\n%s\nbatches: %v", diff, batches)
	}
}

// TestPartitionsOfAFetchAreHandledConcurrently: a fetch of two partitions
// goes to the handler as one batch first; the handler fails it at its first
// record, and the partitions go on concurrently: the first record of each
// then waits for the other's to start. Handled one partition after the
// other, the first would wait in vain; handled concurrently, both meet.
// Within each partition, records keep their offset order.
//
// The records are written before the consumer starts, so its first poll
// usually holds both partitions; but which partitions a fetch holds is the
// client's and the broker's choice (a partition whose start offset is
// still loading is left out of the first fetch). A first poll of one
// partition shows no batch of both and waits in vain, and the scenario
// runs again, on a fresh topic and group, up to attempts times: a consumer
// that never hands a fetch as one batch, or handles partitions one after
// the other, fails every one.
func TestPartitionsOfAFetchAreHandledConcurrently(t *testing.T) {
	t.Parallel()
	const attempts = 3
	var vain []string
	for i := range attempts {
		order, fetches, timeouts := partitionsMeet(t)
		if fetches == 0 || len(timeouts) > 0 {
			vain = append(vain, timeouts...)
			t.Logf("attempt %d: %d batches of both partitions; %v waited in vain for the other partition", i+1, fetches, timeouts)
			continue
		}
		want := map[string][]string{"a": {"a0", "a1", "a2"}, "b": {"b0", "b1", "b2"}}
		if diff := cmp.Diff(want, order); diff != "" {
			t.Errorf("records handled per partition (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatalf("in %d attempts, no fetch was one batch, or %v waited in vain for the other partition: partitions handled one after the other", attempts, vain)
}

// partitionsMeet runs the scenario once: it returns the records handled per
// partition, the handler calls that held both partitions, and the first
// records that waited in vain for the other's.
func partitionsMeet(t *testing.T) (order map[string][]string, fetches int, timeouts []string) {
	t.Helper()
	kcfg, topic, w := twoPartitions(t, "consumer-partitions", "a0", "a1", "a2", "b0", "b1", "b2")
	var mu sync.Mutex
	order = map[string][]string{}
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	closeOnce := map[string]*sync.Once{"a": {}, "b": {}}
	other := map[string]string{"a": "b", "b": "a"}
	handle := func(v string) {
		mu.Lock()
		order[v[:1]] = append(order[v[:1]], v)
		mu.Unlock()
		if v[1] != '0' {
			return
		}
		closeOnce[v[:1]].Do(func() { close(started[v[:1]]) })
		select {
		case <-started[other[v[:1]]]:
		case <-time.After(3 * time.Second):
			mu.Lock()
			timeouts = append(timeouts, v)
			mu.Unlock()
		}
	}
	cfg := consumer.Config{
		Broker: kcfg, Group: kafkatest.Group(t, "partitions"), Topics: []string{topic},
		Handler: func(_ context.Context, ms []broker.Record) error {
			if partitionsOf(ms) > 1 {
				mu.Lock()
				fetches++
				mu.Unlock()
				return &consumer.BatchFailure{Handled: 0, Err: errors.New("the fetch's transaction failed")}
			}
			for _, m := range ms {
				handle(string(m.Value))
			}
			return nil
		},
		Policy:    retryOnce,
		Publisher: w,
	}
	handleAll(t, cfg, &mu, func() bool { return len(order["a"]) >= 3 && len(order["b"]) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	return order, fetches, timeouts
}

// TestAFetchIsOneBatchAndItsFailureKeepsItsPrefix: a fetch of two
// partitions is one handler call; when it stops part way, the records it
// finished are never handled again, the failed one is retried alone (the
// fetch's attempt counting as its first), and the rest of its partition
// goes on. The scenario runs up to three times for a first poll that
// holds both partitions (see TestPartitionsOfAFetchAreHandledConcurrently).
func TestAFetchIsOneBatchAndItsFailureKeepsItsPrefix(t *testing.T) {
	t.Parallel()
	for i := range 3 {
		kcfg, topic, w := twoPartitions(t, "consumer-fetch", "a0", "a1", "a2", "b0", "b1", "b2")
		var (
			mu     sync.Mutex
			first  []string           // the first call that held both partitions
			failed string             // the record that call failed at: its fourth
			counts = map[string]int{} // records handled
			alone  []string           // records handed alone
		)
		handler := func(_ context.Context, ms []broker.Record) error {
			mu.Lock()
			defer mu.Unlock()
			vs := make([]string, len(ms))
			for j, m := range ms {
				vs[j] = string(m.Value)
			}
			if len(ms) == 1 {
				alone = append(alone, vs[0])
			}
			if first == nil && partitionsOf(ms) > 1 && len(ms) == 6 {
				first, failed = vs, vs[4]
				for _, v := range vs[:4] {
					counts[v]++
				}
				return &consumer.BatchFailure{Handled: 4, Err: errors.New("receiver down")}
			}
			for _, v := range vs {
				counts[v]++
			}
			return nil
		}
		cfg := consumer.Config{
			Broker: kcfg, Group: kafkatest.Group(t, "fetch"), Topics: []string{topic}, Handler: handler,
			Policy:    retryOnce,
			Publisher: w,
		}
		handleAll(t, cfg, &mu, func() bool { return len(counts) == 6 })
		mu.Lock()
		if first == nil {
			mu.Unlock()
			t.Logf("attempt %d: no fetch held both partitions", i+1)
			continue
		}
		defer mu.Unlock()
		for v, n := range counts {
			if n != 1 {
				t.Errorf("%s handled %d times, want once (first call %v)", v, n, first)
			}
		}
		if !slices.Contains(alone, failed) {
			t.Errorf("the failed record %s was not retried alone: calls of one record %v", failed, alone)
		}
		return
	}
	t.Fatal("in 3 attempts no fetch held both partitions: a fetch is not handed as one batch")
}

// twoPartitions writes values to a fresh topic of two partitions (those
// starting with "b" to partition 1, the others to 0) and returns the broker,
// the topic and a writer for its DLT.
func twoPartitions(t *testing.T, name string, values ...string) (broker.Config, string, *kafkatest.Writer) {
	t.Helper()
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, name, 2)
	kafkatest.CreateTopic(t, events.DLT(topic), 2)
	w := kafkatest.NewDLTWriter(t, kcfg) // honours Message.Partition
	t.Cleanup(func() { _ = w.Close() })
	var msgs []kafka.Message
	for _, v := range values {
		p := 0
		if v[0] == 'b' {
			p = 1
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Partition: p, Key: []byte(v[:1]), Value: []byte(v)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	return kcfg, topic, w
}

// handleAll runs a member of cfg until done, called under mu, holds, then
// stops it.
func handleAll(t *testing.T, cfg consumer.Config, mu *sync.Mutex, done func() bool) {
	t.Helper()
	m := startMember(t, cfg)
	poll.True(t, 60*time.Second, "every record handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done()
	})
	m.stop(t)
}

// retryOnce retries a failed record once, 10 ms later.
var retryOnce = consumer.Blocking{Backoff: backoff.Exponential{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond}, Retries: 1}

// partitionsOf counts the partitions ms holds records of.
func partitionsOf(ms []broker.Record) int {
	seen := map[int32]bool{}
	for _, m := range ms {
		seen[m.Partition] = true
	}
	return len(seen)
}
