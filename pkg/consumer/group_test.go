package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/poll"
)

// A member that stops gracefully leaves its group: the other member gets
// its partitions and handles new records on them at once, not after the
// session timeout (30 s here, so that a member that did not leave fails
// the test).
func TestStoppedMemberLeavesTheGroupAtOnce(t *testing.T) {
	t.Parallel()
	const session = 30 * time.Second
	kcfg, topic, group, prod := groupTopic(t, "leave", 2)
	cfg := consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic}, SessionTimeout: session}

	a := startMember(t, cfg)
	prod.Plain(kafka.Message{Topic: topic, Partition: 0, Key: []byte("k"), Value: []byte("warm-up")})
	poll.Until(t, 60*time.Second, "a handles the warm-up record", func() (bool, string) {
		return slices.Contains(a.handled(), "warm-up"), fmt.Sprint(a.handled())
	})
	b := startMember(t, cfg)
	poll.Until(t, 60*time.Second, "a stable group of two", func() (bool, string) {
		s := groupState(t, kcfg, group)
		return s == "Stable/2", s
	})

	a.stop(t)
	stopped := time.Now()
	want := []string{"after-0", "after-1"}
	for p, v := range want {
		prod.Plain(kafka.Message{Topic: topic, Partition: p, Key: []byte("k"), Value: []byte(v)})
	}
	poll.Until(t, session/2, "b handles new records on both partitions", func() (bool, string) {
		got := b.handled()
		return slices.Contains(got, want[0]) && slices.Contains(got, want[1]), fmt.Sprint(got, " ", groupState(t, kcfg, group))
	})
	t.Logf("b handled the stopped member's partition %v after the stop (session timeout %v)", time.Since(stopped).Round(time.Millisecond), session)
}

// A commit the broker refuses (the member held its records past the
// rebalance timeout and the group went on without it) is logged with its
// group, topic, partition and offset, and counted by reason; the loop goes
// on consuming.
func TestRefusedCommitIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	kcfg, topic, group, prod := groupTopic(t, "refused", 1)
	reg := prometheus.NewRegistry()
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic}, RebalanceTimeout: 3 * time.Second}

	held := make(chan struct{})
	var once sync.Once
	a := &member{} // what the first member handled
	acfg := cfg
	acfg.Logger, acfg.Metrics = log, consumer.NewMetrics(reg)
	acfg.Handler = each(func(ctx context.Context, m broker.Record) error {
		once.Do(func() {
			close(held)
			// Hold the record until the group has rebalanced without this
			// member: a second member joined, and this one did not rejoin
			// within the rebalance timeout. Not poll.Until: this runs on
			// the consumer's goroutine; the assertions below catch a
			// rebalance that never came.
			rebalancing := false
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); <-time.After(poll.Interval) {
				s := groupState(t, kcfg, group)
				rebalancing = rebalancing || strings.HasPrefix(s, "PreparingRebalance")
				if rebalancing && (s == "Stable/1" || s == "CompletingRebalance/1") {
					return
				}
			}
		})
		return a.handler(ctx, []broker.Record{m})
	})
	startMember(t, acfg)
	prod.Plain(kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("r1")})
	<-held
	for _, r := range consumer.CommitReasons {
		if _, ok := counterValue(t, reg, "consumer_commit_failures_total", map[string]string{"group": group, "reason": r}); !ok {
			t.Errorf("consumer_commit_failures_total{reason=%q} does not exist at 0 from start", r)
		}
	}
	b := startMember(t, cfg)

	refused := func() float64 {
		var n float64
		for _, r := range []string{consumer.CommitRebalanceInProgress, consumer.CommitIllegalGeneration, consumer.CommitUnknownMember} {
			v, _ := counterValue(t, reg, "consumer_commit_failures_total", map[string]string{"group": group, "reason": r})
			n += v
		}
		return n
	}
	poll.Until(t, 90*time.Second, "a refused commit counted", func() (bool, string) {
		return refused() > 0, groupState(t, kcfg, group)
	})
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "kafka commit failed") {
			line = l
			break
		}
	}
	for _, want := range []string{"level=WARN", "group=" + group, "topic=" + topic, "partition=0", "offset=1", "reason="} {
		if !strings.Contains(line, want) {
			t.Errorf("the refused commit's log line lacks %q: %q", want, line)
		}
	}
	t.Logf("logged: %s", line)
	// The loops go on: a later record is handled by the group.
	prod.Plain(kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("r2")})
	poll.Until(t, 60*time.Second, "r2 handled after the refusal", func() (bool, string) {
		return slices.Contains(a.handled(), "r2") || slices.Contains(b.handled(), "r2"), fmt.Sprint(a.handled(), b.handled())
	})
}

// counterValue reads the counter name with exactly labels from reg and
// whether the series exists.
func counterValue(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// Each commit error has one reason label value, one of CommitReasons.
func TestCommitReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{kerr.RebalanceInProgress, consumer.CommitRebalanceInProgress},
		{fmt.Errorf("commit: %w", kerr.IllegalGeneration), consumer.CommitIllegalGeneration},
		{kerr.UnknownMemberID, consumer.CommitUnknownMember},
		{context.DeadlineExceeded, consumer.CommitTimeout},
		{kerr.RequestTimedOut, consumer.CommitTimeout},
		{kerr.CoordinatorNotAvailable, consumer.CommitOther},
		{errors.New("connection reset"), consumer.CommitOther},
	} {
		got := consumer.CommitReason(tc.err)
		if got != tc.want {
			t.Errorf("CommitReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if !slices.Contains(consumer.CommitReasons, got) {
			t.Errorf("CommitReason(%v) = %q, not among CommitReasons %v", tc.err, got, consumer.CommitReasons)
		}
	}
}

// A rebalance that waits for a member's batch (the member holds its
// partitions until it commits): the member finishes the partition in hand,
// commits, rewinds the rest of the batch and lets the rebalance happen,
// rather than handling the whole batch first. Every record is still handled
// exactly once.
func TestRebalanceWaitsOnlyForThePartitionInHand(t *testing.T) {
	t.Parallel()
	kcfg, topic, group, prod := groupTopic(t, "rebalance", 2)
	const perPartition = 5
	for p := range 2 {
		for i := range perPartition {
			v := fmt.Sprintf("p%d-%d", p, i)
			prod.Plain(kafka.Message{Topic: topic, Partition: p, Key: []byte(v), Value: []byte(v)})
		}
	}
	adm, err := broker.NewAdminClient(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	state := func() (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err.Error(), 0
		}
		return gs[group].State, len(gs[group].Members)
	}

	var mu sync.Mutex
	counts := map[string]int{}
	var handled atomic.Int32
	started := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, m broker.Record) error {
		once.Do(func() {
			close(started)
			// Hold the first record until the group wants to rebalance
			// (the second member is joining; this member notices at its next
			// heartbeat, within a second). Not poll.Until: this runs
			// on the consumer's goroutine, where a test cannot fail; the
			// assertions below catch a rebalance that never came.
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
				if s, _ := state(); s == "PreparingRebalance" {
					break
				}
				<-time.After(poll.Interval)
			}
		})
		// A slow handler (its work, not a wait for a condition): handling
		// the rest of the batch would hold the rebalance.
		<-time.After(300 * time.Millisecond)
		mu.Lock()
		counts[string(m.Value)]++
		mu.Unlock()
		handled.Add(1)
		return nil
	}
	// The loop stops between the batches it hands the handler: batches of
	// two keep what a rebalance waits for short.
	cfg := consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic}, Handler: each(h), MaxBatch: 2}
	startMember(t, cfg)
	<-started
	startMember(t, cfg)
	var atStable int32
	poll.Until(t, 60*time.Second, "a stable group of two", func() (bool, string) {
		n := handled.Load()
		s, members := state()
		if s == "Stable" && members == 2 {
			atStable = n
			return true, ""
		}
		return false, fmt.Sprintf("%s, %d members", s, members)
	})
	poll.Until(t, 60*time.Second, "every record handled", func() (bool, string) {
		n := handled.Load()
		return n >= 2*perPartition, fmt.Sprint(n)
	})
	if atStable >= 2*perPartition {
		t.Errorf("the rebalance completed only after all %d records of the batch were handled", atStable)
	}
	mu.Lock()
	defer mu.Unlock()
	for p := range 2 {
		for i := range perPartition {
			if v := fmt.Sprintf("p%d-%d", p, i); counts[v] != 1 {
				t.Errorf("%s handled %d times, want once", v, counts[v])
			}
		}
	}
}

// A rolling upgrade from the kafka-go reader the consumers used before:
// the new consumer continues from the offsets the old one committed in the
// same group, and old and new members can share the group while the
// upgrade is under way (same classic protocol, common assignors).
func TestRollingUpgradeFromKafkaGoReader(t *testing.T) {
	t.Parallel()
	kcfg, topic, group, prod := groupTopic(t, "upgrade", 2)
	put := func(partition int, values ...string) {
		for _, v := range values {
			prod.Plain(kafka.Message{Topic: topic, Partition: partition, Key: []byte(v), Value: []byte(v)})
		}
	}
	oldReader := func() *kafka.Reader { // as broker.NewReader built it before the move to kgo
		return kafka.NewReader(kafka.ReaderConfig{
			Brokers: kcfg.Brokers, GroupID: group, GroupTopics: []string{topic}, StartOffset: kafka.FirstOffset,
			MaxWait: 250 * time.Millisecond, CommitInterval: 0, HeartbeatInterval: time.Second,
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		})
	}

	// The old version handles and commits a, b (partition 0) and c
	// (partition 1).
	put(0, "a", "b")
	put(1, "c")
	r := oldReader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 3 {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("old reader: %v", err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("old reader commit: %v", err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// The new version takes over: it handles only what came after.
	put(0, "d")
	put(1, "e")
	m := startMember(t, consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic}})
	var mu sync.Mutex // guards oldGot
	got := func() []string { return slices.Sorted(slices.Values(m.handled())) }
	poll.Until(t, 60*time.Second, "d and e handled", func() (bool, string) {
		return len(got()) >= 2, fmt.Sprint(got())
	})
	if diff := cmp.Diff([]string{"d", "e"}, got()); diff != "" {
		t.Fatalf("records handled by the new consumer (-want +got):\n%s", diff)
	}

	// An old member joins the group mid-upgrade: the group rebalances
	// between the two, each gets a partition, and a record on each
	// partition is read exactly once by one of them.
	old := oldReader()
	defer func() { _ = old.Close() }()
	var oldGot []string
	oldDone := make(chan error, 1)
	octx, ocancel := context.WithCancel(context.Background())
	defer ocancel()
	go func() {
		for {
			m, err := old.FetchMessage(octx)
			if err != nil {
				oldDone <- err
				return
			}
			mu.Lock()
			oldGot = append(oldGot, string(m.Value))
			mu.Unlock()
			if err := old.CommitMessages(octx, m); err != nil {
				oldDone <- err
				return
			}
		}
	}()
	adm, err := broker.NewAdminClient(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	poll.Until(t, 60*time.Second, "a stable group of two members", func() (bool, string) {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		gs, err := adm.DescribeGroups(dctx, group)
		if err != nil {
			return false, err.Error()
		}
		g := gs[group]
		return g.State == "Stable" && len(g.Members) == 2, fmt.Sprintf("%s, %d members, protocol %q", g.State, len(g.Members), g.Protocol)
	})
	put(0, "f")
	put(1, "g")
	poll.Until(t, 60*time.Second, "f and g read", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		handled := m.handled()
		n := len(oldGot) + len(handled)
		return n >= 4, fmt.Sprintf("old %v, new %v", oldGot, handled)
	})
	mu.Lock()
	all := slices.Sorted(slices.Values(append(m.handled(), oldGot...)))
	oldN := len(oldGot)
	mu.Unlock()
	if diff := cmp.Diff([]string{"d", "e", "f", "g"}, all); diff != "" {
		t.Errorf("records read by the old and new members (-want +got):\n%s", diff)
	}
	if oldN != 1 {
		t.Errorf("the old member read %d records, want 1 (one partition each)", oldN)
	}
}
