package broker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The suite's consumers read with franz-go's kgo, not kafka-go: kafka-go's
// reader hands transaction markers to the application as messages and
// ignores the aborted-transactions list of a fetch, whatever its
// IsolationLevel says (segmentio/kafka-go issue 1332, pull request 1446),
// so a record of an aborted transaction would be applied. kgo reads
// read_committed: no control record reaches the caller unless asked for, no
// record of an aborted transaction ever does, and no fetch goes past the
// last stable offset (the first offset of a transaction still open).

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
	}, sec...), nil
}

func (c Config) maxMessageBytes() int64 {
	if c.MaxMessageBytes <= 0 {
		return 1 << 20
	}
	return c.MaxMessageBytes
}

// ConsumerConfig describes a consumer-group client.
type ConsumerConfig struct {
	Group  string
	Topics []string
	// MaxWait is how long a fetch waits for data; default 250ms.
	MaxWait time.Duration
	// OnRevoked is called when the group takes partitions away (and when
	// the client leaves the group): the last moment to commit what was
	// handled on them.
	OnRevoked func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32)
	// OnLost is called when partitions were lost without a clean
	// revocation (the member was fenced): committing is pointless.
	OnLost func(ctx context.Context, cl *kgo.Client, lost map[string][]int32)
	// OnRebalanceWaiting is called, in a goroutine of its own, when a
	// rebalance waits for the records in hand to be finished.
	OnRebalanceWaiting func()
	// Logger receives the client's warnings and errors (a group it cannot
	// join, a broker it cannot reach); nil: none.
	Logger *slog.Logger
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (a killed process) before it moves its partitions;
	// default DefaultSessionTimeout. A member that stops cleanly leaves
	// the group at once instead.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for a member to
	// finish its records in hand and rejoin before it drops the member;
	// default DefaultRebalanceTimeout.
	RebalanceTimeout time.Duration
}

// Defaults of ConsumerConfig's group timeouts.
const (
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 60 * time.Second
)

// NewConsumerClient returns the consumer-group client every consumer loop
// of the suite uses:
//   - read_committed (see above), with control records kept so that the
//     loop can commit past a transaction marker (the handler never sees
//     one: IsControl), as Spring's fixTxOffsets does; without that the
//     committed offset of a partition ending in a marker stays one short
//     and the lag never reaches 0;
//   - manual commits only (the loop commits after handling);
//   - rebalances held while polled records are in hand
//     (BlockRebalanceOnPoll), so that the loop commits only partitions it
//     still owns and a batch is not handled twice by two members;
//   - the classic group protocol with the range and round-robin assignors,
//     the ones kafka-go's reader offers: during a rolling upgrade old and
//     new members share the group and its committed offsets;
//   - the earliest offset where the group has committed none.
//
// The caller closes the client (which leaves the group).
func NewConsumerClient(cfg Config, cc ConsumerConfig) (*kgo.Client, error) {
	maxWait := cc.MaxWait
	if maxWait <= 0 {
		maxWait = 250 * time.Millisecond
	}
	base, err := cfg.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka consumer %s: %w", cc.Group, err)
	}
	opts := append(base,
		kgo.ConsumerGroup(cc.Group),
		kgo.ConsumeTopics(cc.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(maxWait),
		kgo.FetchMaxBytes(int32(max(cfg.maxMessageBytes()*10, 10<<20))),      //nolint:gosec // bounded
		kgo.FetchMaxPartitionBytes(int32(max(cfg.maxMessageBytes(), 1<<20))), //nolint:gosec // bounded
		kgo.SessionTimeout(orDefault(cc.SessionTimeout, DefaultSessionTimeout)),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(orDefault(cc.RebalanceTimeout, DefaultRebalanceTimeout)),
		kgo.RetryBackoffFn(ConsumerRetryBackoff),
	)
	if cc.OnRevoked != nil {
		opts = append(opts, kgo.OnPartitionsRevoked(cc.OnRevoked))
	}
	if cc.OnLost != nil {
		opts = append(opts, kgo.OnPartitionsLost(cc.OnLost))
	}
	if cc.OnRebalanceWaiting != nil {
		f := cc.OnRebalanceWaiting
		opts = append(opts, kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { f() }))
	}
	if cc.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{cc.Logger}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer %s: %w", cc.Group, err)
	}
	return cl, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ConsumerRetryBackoff is how long a consumer client waits before its
// attempt number fails+1 at a failed request, a failed group join among
// them: 100 ms doubling up to 1 s, with 20% jitter. franz-go's default
// doubles from 250 ms up to 5 s, so after a broker outage of a few seconds
// a consumer could sleep up to 5 s more before rejoining its group, and
// the flow would resume seconds after the broker was back (issue 14 wants
// it within 2 s; the chaos test measured 4.5 s).
func ConsumerRetryBackoff(fails int) time.Duration {
	const (
		low  = 100 * time.Millisecond
		high = time.Second
	)
	d := high
	if fails <= 0 {
		d = low
	} else if fails < 5 {
		d = min(low<<(fails-1), high)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())) //nolint:gosec // jitter, not a secret
}

// NewPartitionClient returns a client that reads the given partitions of
// topic from the given offsets, read_committed, without a consumer group:
// it commits nothing. Control records are kept (IsControl tells them) so a
// reader can tell it has passed a transaction marker at the end of a
// partition. The caller closes it.
func NewPartitionClient(cfg Config, topic string, from map[int32]int64) (*kgo.Client, error) {
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

// IsControl reports whether r is a transaction marker rather than a record
// anyone wrote: it must never reach a handler.
func IsControl(r *kgo.Record) bool { return r.Attrs.IsControl() }
