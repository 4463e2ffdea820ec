package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/poll"
)

// member is one consumer.Run in a group, stopped by stop or at cleanup.
type member struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	seen   []string
}

func (m *member) handler(_ context.Context, msg broker.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, string(msg.Value))
	return nil
}

func (m *member) handled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

// startMember runs cfg (Handler defaults to the member's own) until stop.
func startMember(tb testing.TB, cfg consumer.Config) *member {
	tb.Helper()
	m := &member{done: make(chan error, 1)}
	if cfg.Handler == nil {
		cfg.Handler = m.handler
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- consumer.Run(ctx, cfg) }()
	tb.Cleanup(func() { m.stop(tb) })
	return m
}

// stop cancels the member and waits for Run to return (once).
func (m *member) stop(tb testing.TB) {
	tb.Helper()
	m.cancel()
	select {
	case err, ok := <-m.done:
		if ok && err != nil {
			tb.Errorf("consumer.Run: %v", err)
		}
		if ok {
			close(m.done)
		}
	case <-time.After(time.Minute):
		tb.Error("consumer.Run did not return within a minute of the cancel")
	}
}

// groupState describes group as "<state>/<members>".
func groupState(tb testing.TB, kcfg broker.Config, group string) string {
	tb.Helper()
	adm, err := broker.NewAdminClient(kcfg)
	if err != nil {
		return err.Error()
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s/%d", gs[group].State, len(gs[group].Members))
}

// A member that stops gracefully leaves its group: the other member gets
// its partitions and handles new records on them at once, not after the
// session timeout (30 s here, so that a member that did not leave fails
// the test).
func TestStoppedMemberLeavesTheGroupAtOnce(t *testing.T) {
	t.Parallel()
	const session = 30 * time.Second
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-leave", 2)
	group := kafkatest.Group(t, "leave")
	prod := kafkatest.NewProducer(t)
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
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-refused", 1)
	group := kafkatest.Group(t, "refused")
	prod := kafkatest.NewProducer(t)
	reg := prometheus.NewRegistry()
	logs := &lockedBuffer{b: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := consumer.Config{Broker: kcfg, Group: group, Topics: []string{topic}, RebalanceTimeout: 3 * time.Second}

	held := make(chan struct{})
	var once sync.Once
	a := &member{} // what the first member handled
	acfg := cfg
	acfg.Logger, acfg.Metrics = log, consumer.NewMetrics(reg)
	acfg.Handler = func(ctx context.Context, m broker.Record) error {
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
		return a.handler(ctx, m)
	}
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

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
