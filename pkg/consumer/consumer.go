// Package consumer is the suite's one Kafka consumer loop: a consumer-group
// member (broker.NewGroup, read_committed: no transaction marker and no
// record of an aborted transaction ever reaches a handler) that hands
// records to a handler, commits an offset only after the handler succeeded
// for that record and every record before it in its partition, and disposes
// of failures with one of two policies:
//
//   - Blocking: retry in place with exponential backoff while the partition
//     waits, then publish to the DLT (the ledger, as Spring's
//     DefaultErrorHandler);
//   - RetryTopics: republish to <topic>-retry-<ms> topics consumed after their
//     delay, then the DLT, without ever holding up the main topic (the
//     notifications, as Spring's non-blocking retries).
//
// A handler error wrapped with Permanent, or wrapping events.ErrMalformed,
// goes to the DLT at once: an undecodable record never blocks its partition.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/paysuite/payments/pkg/broker"
)

// Config describes one consumer.
type Config struct {
	Broker broker.Config
	Group  string
	Topics []string
	// Handler processes the records fetched together (process in
	// handle.go says which); required. MaxBatch bounds them (default 100).
	Handler  Handler
	MaxBatch int
	// Policy handles failures; default BlockingRetries.
	Policy Policy
	// Publisher writes DLT and retry records; default a
	// broker.NewDLTProducer of Broker, closed when Run returns.
	Publisher broker.Publisher
	Logger    *slog.Logger
	Metrics   *Metrics
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
	// SessionTimeout and RebalanceTimeout tune the group membership
	// (broker.GroupConfig); zero: broker.DefaultSessionTimeout and
	// broker.DefaultRebalanceTimeout.
	SessionTimeout, RebalanceTimeout time.Duration
	// AttemptTimeout bounds one call of Handler; default
	// DefaultAttemptTimeout. An attempt cut off fails with
	// context.DeadlineExceeded, an outage: the record is tried again
	// without counting as an attempt.
	AttemptTimeout time.Duration
}

// DefaultAttemptTimeout is AttemptTimeout's default, postgres.CallTimeout:
// a handler's database that hangs (SIGSTOP, a partition without resets)
// never answers, and without a bound the partition would wait for it
// instead of reconnecting, through a multi-host URL, to the promoted
// standby.
const DefaultAttemptTimeout = 10 * time.Second

// errStopping aborts a record because the consumer is shutting down: the
// record is not committed and will be delivered again.
var errStopping = errors.New("consumer stopping")

// errRebalance ends a batch early because a rebalance waits for it: the
// records handled are committed, the others fetched again.
var errRebalance = errors.New("rebalance waiting")

// Run consumes until ctx is cancelled: it finishes the records in hand,
// commits, closes its clients and returns nil. With RetryTopics it also runs
// one consumer per retry topic, in groups "<group>-retry-<ms>".
func Run(ctx context.Context, cfg Config) error {
	if cfg.Handler == nil || cfg.Group == "" || len(cfg.Topics) == 0 {
		return errors.New("consumer: group, topics and handler are required")
	}
	if cfg.Publisher == nil {
		p, err := broker.NewDLTProducer(cfg.Broker)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", cfg.Group, err)
		}
		defer func() { _ = p.Close() }() // every record was acknowledged before Run returns
		cfg.Publisher = p
	}
	if cfg.Policy == nil {
		cfg.Policy = BlockingRetries
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	cfg.Metrics.prime(cfg.Group, cfg.Topics, cfg.Policy)
	rt, isRetryTopics := cfg.Policy.(RetryTopics)
	if !isRetryTopics {
		return (&loop{cfg: cfg, group: cfg.Group, topics: cfg.Topics, level: 0}).run(ctx)
	}
	errs := make(chan error, len(rt.Delays)+1)
	go func() { errs <- (&loop{cfg: cfg, group: cfg.Group, topics: cfg.Topics, level: 0}).run(ctx) }()
	for i, d := range rt.Delays {
		topics := make([]string, len(cfg.Topics))
		for j, t := range cfg.Topics {
			topics[j] = broker.RetryTopic(t, d)
		}
		l := &loop{cfg: cfg, group: cfg.Group + "-retry-" + strconv.FormatInt(d.Milliseconds(), 10), topics: topics, level: i + 1}
		go func() { errs <- l.run(ctx) }()
	}
	var first error
	for range len(rt.Delays) + 1 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loop consumes one set of topics in one group. level 0 is the main topics;
// level i > 0 is the i-th retry topic, whose records wait for their due time.
type loop struct {
	cfg    Config
	group  string
	topics []string
	level  int
	// rebalanceWaiting is set when the group wants to rebalance while
	// this member holds polled records.
	rebalanceWaiting atomic.Bool
	// waiting counts the records (one per partition at most) waiting for
	// an unavailable dependency.
	waiting atomic.Int32
}

func (l *loop) run(ctx context.Context) error {
	log := l.cfg.Logger.With("group", l.group)
	c := &committer{log: log, group: l.group, failures: l.cfg.Metrics.CommitFailures}
	g, err := broker.NewGroup(l.cfg.Broker, broker.GroupConfig{
		Group: l.group, Topics: l.topics,
		OnRevoked:          c.onRevoked,
		OnLost:             c.onLost,
		OnRebalanceWaiting: func() { l.rebalanceWaiting.Store(true) },
		Logger:             log,
		SessionTimeout:     l.cfg.SessionTimeout,
		RebalanceTimeout:   l.cfg.RebalanceTimeout,
	})
	if err != nil {
		return err
	}
	// Close leaves the group; OnRevoked commits whatever a failed commit
	// left behind first.
	defer g.Close()
	// Records already buffered are handled together and committed once;
	// a retry topic takes one record at a time, as each waits for its due
	// time.
	maxBatch := l.cfg.MaxBatch
	if l.level > 0 {
		maxBatch = 1
	}
	go l.reportLag(ctx)
	for {
		// While offsets are pending, the poll waits no longer than until
		// they are due, so that they are committed when no record comes.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if at, ok := c.dueAt(); ok {
			pctx, cancel = context.WithDeadline(ctx, at)
		}
		fetch := g.Poll(pctx, maxBatch)
		cancel()
		if ctx.Err() != nil || fetch.Closed {
			if !fetch.Closed {
				c.commit(context.WithoutCancel(ctx), g)
			}
			g.AllowRebalance()
			return nil
		}
		if c.due() {
			c.commit(ctx, g)
		}
		for _, e := range fetch.Errors {
			log.WarnContext(ctx, "kafka fetch failed", "topic", e.Topic, "partition", e.Partition, "err", e.Err)
		}
		if len(fetch.Records) == 0 {
			g.AllowRebalance()
			if len(fetch.Errors) > 0 && !sleep(ctx, time.Second) {
				return nil
			}
			continue
		}
		l.rebalanceWaiting.Store(false)
		// Of each partition's records, the loop commits the prefix that
		// was handled, and fetches the rest again.
		parts := byPartition(fetch.Records)
		handled, err := l.process(ctx, fetch, parts)
		var done, left []broker.Record
		for i, part := range parts {
			done = append(done, part[:handled[i]]...)
			left = append(left, part[handled[i]:]...)
		}
		if len(left) > 0 && !errors.Is(err, errStopping) && ctx.Err() == nil {
			// A rebalance is waiting: let it happen, and fetch the records
			// not handled again (from whoever owns them next).
			g.Rewind(left)
		}
		c.handled(fetch, done)
		// Commit when due, and when stopping or before a waiting rebalance
		// (what was handled must not be handled again needlessly).
		if c.due() || l.rebalanceWaiting.Load() || errors.Is(err, errStopping) || ctx.Err() != nil {
			c.commit(context.WithoutCancel(ctx), g)
		}
		g.AllowRebalance()
		if errors.Is(err, errStopping) || ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errRebalance) {
			return err
		}
	}
}
