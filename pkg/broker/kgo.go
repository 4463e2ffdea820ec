package broker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paysuite/payments/pkg/backoff"
)

// The suite's consumers read with franz-go's kgo, not kafka-go: kafka-go's
// reader hands transaction markers to the application as messages and
// ignores the aborted-transactions list of a fetch, whatever its
// IsolationLevel says, so a record of an aborted transaction would be
// applied. kgo reads read_committed: no control record reaches the caller
// unless asked for, no record of an aborted transaction ever does, and no
// fetch goes past the last stable offset (the first offset of a
// transaction still open).

// kgoOpts are the options every franz-go client of the suite starts from:
// how to reach and talk to the cluster. Connection settings (TLS, SASL)
// belong here and only here, so consumers, admin clients and the DLT
// tooling all get them.
func (c Config) kgoOpts() ([]kgo.Opt, error) {
	sec, err := c.KgoSecurityOpts() // SASL, TLS and the test dialer
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID("payments"),
		kgo.DialTimeout(5 * time.Second),
		kgo.MetadataMinAge(500 * time.Millisecond),
		kgo.MetadataMaxAge(30 * time.Second),
		kgo.BrokerMaxReadBytes(int32(max(c.maxMessageBytes()*16, 100<<20))), //nolint:gosec // bounded above by the broker's limits
		kgo.WithHooks(requestCounter{}),
	}, sec...), nil
}

func (c Config) maxMessageBytes() int64 {
	if c.MaxMessageBytes <= 0 {
		return DefaultMaxMessageBytes
	}
	return c.MaxMessageBytes
}

// newGroupClient returns the consumer-group client of a Group:
//   - read_committed (see above), with control records kept so that the
//     loop can commit past a transaction marker (the handler never sees
//     one: Fetch.Marker), as Spring's fixTxOffsets does; without that the
//     committed offset of a partition ending in a marker stays one short
//     and the lag never reaches 0;
//   - manual commits only (the loop commits after handling);
//   - rebalances held while polled records are in hand
//     (BlockRebalanceOnPoll), so that the loop commits only partitions it
//     still owns and a batch is not handled twice by two members;
//   - the classic group protocol with the range and round-robin assignors,
//     the ones kafka-go's reader offers: during a rolling upgrade old and
//     new members share the group and its committed offsets;
//   - the earliest offset where the group has committed none;
//   - requests and group joins retried after ConsumerRetryBackoff.
func newGroupClient(cfg Config, gc GroupConfig) (*kgo.Client, error) {
	maxWait := gc.MaxWait
	if maxWait <= 0 {
		maxWait = 250 * time.Millisecond
	}
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka consumer %s: %w", gc.Group, err)
	}
	opts := append(base,
		kgo.ConsumerGroup(gc.Group),
		kgo.ConsumeTopics(gc.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(maxWait),
		kgo.FetchMaxBytes(int32(max(cfg.maxMessageBytes()*10, 10<<20))),      //nolint:gosec // bounded
		kgo.FetchMaxPartitionBytes(int32(max(cfg.maxMessageBytes(), 1<<20))), //nolint:gosec // bounded
		kgo.SessionTimeout(orDefault(gc.SessionTimeout, DefaultSessionTimeout)),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(orDefault(gc.RebalanceTimeout, DefaultRebalanceTimeout)),
		kgo.RetryBackoffFn(ConsumerRetryBackoff),
	)
	if gc.OnRevoked != nil {
		f := gc.OnRevoked
		opts = append(opts, kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			f(ctx, &Group{cl: cl}, revoked)
		}))
	}
	if gc.OnLost != nil {
		f := gc.OnLost
		opts = append(opts, kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, lost map[string][]int32) { f(ctx, lost) }))
	}
	if gc.OnRebalanceWaiting != nil {
		f := gc.OnRebalanceWaiting
		opts = append(opts, kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { f() }))
	}
	if gc.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{gc.Logger}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer %s: %w", gc.Group, err)
	}
	return cl, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// consumerRetry is the delay of ConsumerRetryBackoff. It is short and
// bounded at a second so that, once a broker is back after an outage, a
// consumer rejoins its group and the flow resumes within about a second;
// franz-go's default (250 ms doubling up to 5 s) could leave it asleep for
// seconds more.
var consumerRetry = backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: time.Second, Jitter: true}

// ConsumerRetryBackoff is how long a consumer client waits before its
// attempt number fails+1 at a failed request, a failed group join among
// them: 100 ms doubling up to 1 s, jittered (pkg/backoff).
func ConsumerRetryBackoff(fails int) time.Duration { return consumerRetry.Delay(fails) }

// newPartitionClient returns a client that reads the given partitions of
// topic from the given offsets, read_committed, without a consumer group:
// it commits nothing. Control records are kept (Fetch.Marker tells them)
// so a reader can tell it has passed a transaction marker at the end of a
// partition. The caller closes it.
func newPartitionClient(cfg Config, topic string, from map[int32]int64) (*kgo.Client, error) {
	offsets := make(map[int32]kgo.Offset, len(from))
	for p, o := range from {
		offsets[p] = kgo.NewOffset().At(o)
	}
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka reader of %s: %w", topic, err)
	}
	cl, err := kgo.NewClient(append(base,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka reader of %s: %w", topic, err)
	}
	return cl, nil
}

// NewAdminClient returns an admin client (metadata, offsets, groups).
// Closing it closes its connections.
func NewAdminClient(cfg Config) (*kadm.Client, error) {
	opts, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka admin client: %w", err)
	}
	return kadm.NewClient(cl), nil
}

// kgoLogger passes kgo's warnings and errors to slog; its info and debug
// lines (every request) stay out.
type kgoLogger struct{ log *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka client: "+msg, keyvals...)
}
