package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/poll"
)

// A rolling upgrade from the kafka-go reader the consumers used before:
// the new consumer continues from the offsets the old one committed in the
// same group, and old and new members can share the group while the
// upgrade is under way (same classic protocol, common assignors).
func TestRollingUpgradeFromKafkaGoReader(t *testing.T) {
	t.Parallel()
	kcfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "consumer-upgrade", 2)
	group := kafkatest.Group(t, "upgrade")
	prod := kafkatest.NewProducer(t)
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
	var mu sync.Mutex
	var handled []string
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(runCtx, consumer.Config{
			Broker: kcfg, Group: group, Topics: []string{topic}, Logger: slog.New(slog.DiscardHandler),
			Handler: func(_ context.Context, m broker.Record) error {
				mu.Lock()
				handled = append(handled, string(m.Value))
				mu.Unlock()
				return nil
			},
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer.Run: %v", err)
		}
	})
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(handled))
	}
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
		n := len(oldGot) + len(handled)
		return n >= 4, fmt.Sprintf("old %v, new %v", oldGot, handled)
	})
	mu.Lock()
	all := slices.Sorted(slices.Values(append(append([]string(nil), handled...), oldGot...)))
	oldN := len(oldGot)
	mu.Unlock()
	if diff := cmp.Diff([]string{"d", "e", "f", "g"}, all); diff != "" {
		t.Errorf("records read by the old and new members (-want +got):\n%s", diff)
	}
	if oldN != 1 {
		t.Errorf("the old member read %d records, want 1 (one partition each)", oldN)
	}
}
