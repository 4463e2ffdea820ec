package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/test/support/kafkatest"
)

// member is one consumer.Run in a group, stopped by stop or at cleanup.
type member struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	seen   []string
}

func (m *member) handler(_ context.Context, ms []broker.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range ms {
		m.seen = append(m.seen, string(msg.Value))
	}
	return nil
}

// each is a consumer.Handler that runs h on the records of its batch in
// turn and stops at the first that fails, naming it in a BatchFailure.
func each(h func(context.Context, broker.Record) error) consumer.Handler {
	return func(ctx context.Context, ms []broker.Record) error {
		for i, m := range ms {
			if err := h(ctx, m); err != nil {
				return &consumer.BatchFailure{Handled: i, Err: err}
			}
		}
		return nil
	}
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

// groupTopic creates a topic consumer-<name> of partitions partitions and
// returns it with the broker, a fresh group to consume it and a producer.
func groupTopic(t *testing.T, name string, partitions int) (kcfg broker.Config, topic, group string, prod *kafkatest.Producer) {
	t.Helper()
	kcfg = broker.Config{Brokers: kafkatest.Brokers(t)}
	return kcfg, kafkatest.Topic(t, "consumer-"+name, partitions), kafkatest.Group(t, name), kafkatest.NewProducer(t)
}
