// Package consumer is the suite's one Kafka consumer loop: a consumer-group
// client (broker.NewConsumerClient, read_committed: no transaction marker and
// no record of an aborted transaction ever reaches a handler) that hands
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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
)

// Handler processes one record. It must be idempotent: a record may be
// delivered again after a crash or a rebalance.
type Handler func(ctx context.Context, m kafka.Message) error

// BatchHandler processes records of one partition, in offset order, all or
// nothing: on error, the loop handles each record of the batch again with
// the Handler.
type BatchHandler func(ctx context.Context, ms []kafka.Message) error

// BatchFailure is a BatchHandler's error when its batch stopped part way:
// ms[:Handled] are done, ms[Handled] was attempted once and failed with Err
// (the attempt must not be made again at once, e.g. a webhook already
// called), and ms[Handled+1:] were not tried. The loop commits the first
// ones, disposes of ms[Handled] by its policy as if Handler had returned
// Err for it, and handles the rest one by one. Any other error makes the
// loop handle the whole batch again one by one.
type BatchFailure struct {
	Handled int
	Err     error
}

func (e *BatchFailure) Error() string {
	return fmt.Sprintf("batch stopped at record %d: %v", e.Handled, e.Err)
}
func (e *BatchFailure) Unwrap() error { return e.Err }

// Publisher sends records (DLT and retry topics); *kafka.Writer is one.
// A record the loop forwards names the partition of the record it came from
// (kafka.Message.Partition); broker.NewDLTWriter keeps it there when the
// target topic has that partition, as Spring does.
type Publisher = broker.Publisher

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the record goes to the DLT at
// once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked Permanent or is a decoding
// error (events.ErrMalformed).
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, events.ErrMalformed)
}

// Backoff is an exponential delay: Initial, times Multiplier per retry, at
// most Max; the suite's one retry delay (pkg/backoff).
type Backoff = backoff.Exponential

// forwardBackoff paces the retries of a forward to a retry topic or the DLT
// that the broker did not acknowledge.
var forwardBackoff = Backoff{Initial: time.Second, Multiplier: 2, Max: 15 * time.Second}

// Policy says what happens to a record whose handler failed.
type Policy interface{ isPolicy() }

// Blocking retries a failed record in place Retries times with Backoff while
// its partition waits, then sends it to the DLT.
type Blocking struct {
	Backoff Backoff
	Retries int
}

// RetryTopics republishes a failed record to one retry topic per delay, in
// order, then to the DLT: len(Delays)+1 attempts in all.
type RetryTopics struct {
	Delays []time.Duration
}

func (Blocking) isPolicy()    {}
func (RetryTopics) isPolicy() {}

// BlockingRetries retries in place while the partition waits: 500 ms, x2,
// at most 15 s, 5 retries, then the DLT (CONTRACTS.md section 6). The
// ledger, antifraud and the transfers projection use it, where order per
// key matters.
var BlockingRetries = Blocking{Backoff: Backoff{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 15 * time.Second}, Retries: 5}

// DelayedRetryTopics moves a failed record aside to retry topics after 1 s,
// 2 s and 4 s, 4 attempts in all, then the DLT (CONTRACTS.md section 7):
// the partition does not wait, for consumers (notifications) where order
// does not matter.
var DelayedRetryTopics = RetryTopics{Delays: broker.RetryDelays}

// Config describes one consumer.
type Config struct {
	Broker broker.Config
	Group  string
	Topics []string
	// Handler processes one record; required.
	Handler Handler
	// Batch, when set, processes the records fetched together from one
	// partition in one call; MaxBatch bounds them (default 100).
	Batch    BatchHandler
	MaxBatch int
	// Policy handles failures; default BlockingRetries.
	Policy Policy
	// Publisher writes DLT and retry records; default a
	// broker.NewDLTWriter of Broker, closed when Run returns.
	Publisher Publisher
	Logger    *slog.Logger
	Metrics   *Metrics
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
	// SessionTimeout and RebalanceTimeout tune the group membership
	// (broker.ConsumerConfig); zero: broker.DefaultSessionTimeout and
	// broker.DefaultRebalanceTimeout.
	SessionTimeout, RebalanceTimeout time.Duration
	// AttemptTimeout bounds one call of Handler or Batch; default
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
		w := broker.NewDLTWriter(cfg.Broker)
		defer func() { _ = w.Close() }() // every write was acknowledged before Run returns
		cfg.Publisher = w
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
	cl, err := broker.NewConsumerClient(l.cfg.Broker, broker.ConsumerConfig{
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
	defer cl.Close()
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
		fetches := cl.PollRecords(pctx, maxBatch)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			if !fetches.IsClientClosed() {
				c.commit(context.WithoutCancel(ctx), cl)
			}
			cl.AllowRebalance()
			return nil
		}
		if c.due() {
			c.commit(ctx, cl)
		}
		failed := false
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			failed = true
			log.WarnContext(ctx, "kafka fetch failed", "topic", topic, "partition", partition, "err", err)
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			cl.AllowRebalance()
			if failed && !sleep(ctx, time.Second) {
				return nil
			}
			continue
		}
		l.rebalanceWaiting.Store(false)
		batch := make([]kafka.Message, len(recs))
		markers := map[position]bool{}
		for i, r := range recs {
			batch[i] = broker.ToMessage(r)
			if broker.IsControl(r) {
				markers[positionOf(batch[i])] = true
			}
		}
		done, err := l.process(ctx, batch, markers)
		handled := make(map[position]bool, len(done))
		for _, m := range done {
			handled[positionOf(m)] = true
		}
		var commit, left []*kgo.Record
		for i, r := range recs {
			if handled[positionOf(batch[i])] {
				commit = append(commit, r)
			} else {
				left = append(left, r)
			}
		}
		if len(left) > 0 && !errors.Is(err, errStopping) && ctx.Err() == nil {
			// A rebalance is waiting: let it happen, and fetch the records
			// not handled again (from whoever owns them next).
			cl.SetOffsets(rewind(left))
		}
		c.handled(commit)
		// Commit when due, and when stopping or before a waiting rebalance
		// (what was handled must not be handled again needlessly).
		if c.due() || l.rebalanceWaiting.Load() || errors.Is(err, errStopping) || ctx.Err() != nil {
			c.commit(context.WithoutCancel(ctx), cl)
		}
		cl.AllowRebalance()
		if errors.Is(err, errStopping) || ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, errRebalance) {
			return err
		}
	}
}

// position locates a record.
type position struct {
	topic     string
	partition int
	offset    int64
}

func positionOf(m kafka.Message) position { return position{m.Topic, m.Partition, m.Offset} }

// rewind returns, for every partition of recs, the lowest offset in recs:
// where to fetch again the records left unhandled.
func rewind(recs []*kgo.Record) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range recs {
		ps := out[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			out[r.Topic] = ps
		}
		if o, ok := ps[r.Partition]; !ok || r.Offset < o.Offset {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	return out
}

// process handles a fetched batch and returns the records that may be
// committed: for each partition, the prefix that was handled.
//
// The partitions of a batch are handled concurrently, each in offset order:
// records of one partition never overtake each other, and a partition
// waiting (a retry, an outage, a slow transaction) no longer delays the
// records of the others fetched with it, which handled one partition after
// another queued behind every transaction of the fetch.
//
// markers are the transaction markers of the batch: they are committed with
// the records around them and never handed to a handler.
func (l *loop) process(ctx context.Context, batch []kafka.Message, markers map[position]bool) ([]kafka.Message, error) {
	parts := byPartition(batch)
	if len(parts) == 1 {
		return l.processPartition(ctx, parts[0], markers)
	}
	type result struct {
		done []kafka.Message
		err  error
	}
	results := make([]result, len(parts))
	var wg sync.WaitGroup
	for i, all := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].done, results[i].err = l.processPartition(ctx, all, markers)
		}()
	}
	wg.Wait()
	var done []kafka.Message
	var err error
	for _, r := range results {
		done = append(done, r.done...)
		err = graver(err, r.err)
	}
	return done, err
}

// graver returns the error of a and b that decides what the loop does
// next: a failure of the loop itself, then stopping, then a rebalance.
func graver(a, b error) error {
	rank := func(err error) int {
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errRebalance):
			return 1
		case errors.Is(err, errStopping):
			return 2
		default:
			return 3
		}
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// processPartition handles the records of one partition, in offset order,
// and returns the prefix handled.
func (l *loop) processPartition(ctx context.Context, all []kafka.Message, markers map[position]bool) ([]kafka.Message, error) {
	isMarker := func(m kafka.Message) bool { return markers[positionOf(m)] }
	if l.rebalanceWaiting.Load() {
		// Start no more partitions of this batch: a rebalance waits for it
		// (and the member would be dropped from the group past the
		// rebalance timeout).
		return nil, errRebalance
	}
	part := slices.DeleteFunc(slices.Clone(all), isMarker)
	if len(part) == 0 {
		return all, nil
	}
	skip, failed := 0, error(nil) // what a stopped batch finished, and its failure
	if l.cfg.Batch != nil && l.level == 0 && len(part) > 1 {
		start := l.cfg.Now()
		spans := make([]trace.Span, len(part))
		for i, m := range part {
			_, spans[i] = l.startSpan(ctx, m)
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.AttemptTimeout)
		err := l.cfg.Batch(bctx, part)
		cancel()
		for _, sp := range spans {
			if err != nil {
				sp.RecordError(err)
			}
			sp.End()
		}
		l.cfg.Metrics.BatchSize.Observe(float64(len(part)))
		if err == nil {
			for _, m := range part {
				l.cfg.Metrics.observe(l.group, m.Topic, "ok", l.cfg.Now().Sub(start))
			}
			return all, nil
		}
		l.cfg.Logger.WarnContext(ctx, "batch failed; handling its records one by one",
			"group", l.group, "topic", part[0].Topic, "partition", part[0].Partition, "records", len(part), "err", err)
		if bf, ok := errors.AsType[*BatchFailure](err); ok && bf.Handled >= 0 && bf.Handled < len(part) {
			skip, failed = bf.Handled, bf.Err
		}
	}
	var done []kafka.Message
	seen := 0 // records (not markers) of all passed so far
	for _, m := range all {
		if isMarker(m) {
			done = append(done, m)
			continue
		}
		seen++
		if seen <= skip {
			done = append(done, m) // finished by the batch
			continue
		}
		if seen == skip+1 && failed != nil {
			// Attempted by the batch: its failure is this attempt's result.
			first := failed
			failed = nil
			if err := l.handleAfter(ctx, m, first); err != nil {
				return done, err
			}
			done = append(done, m)
			continue
		}
		if ctx.Err() != nil {
			// Stopping: the record in hand was finished; the rest of
			// the fetch is delivered again to whoever consumes next.
			return done, errStopping
		}
		if len(done) > 0 && l.rebalanceWaiting.Load() {
			// A rebalance waits: with every partition of the fetch in
			// hand at once, each stops after its record in hand.
			return done, errRebalance
		}
		if err := l.handle(ctx, m); err != nil {
			return done, err
		}
		done = append(done, m)
	}
	return done, nil
}

// handle runs the handler on m until it succeeds or m is disposed of (retry
// topic or DLT). It returns errStopping when ctx ends first; m must then not
// be committed.
func (l *loop) handle(ctx context.Context, m kafka.Message) error {
	return l.handleAfter(ctx, m, nil)
}

// handleAfter is handle for a record whose first attempt was already made
// elsewhere (a batch) and failed with first; nil means no attempt was made.
func (l *loop) handleAfter(ctx context.Context, m kafka.Message, first error) error {
	if l.level > 0 {
		if due := dlt.DueAt(m); !due.IsZero() {
			if err := l.dueTooFar(m, due); err != nil {
				l.cfg.Metrics.observe(l.group, m.Topic, "poison", 0)
				l.cfg.Logger.ErrorContext(ctx, "retry record due too far ahead; sending it to the DLT", "group", l.group,
					"topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "err", err)
				return l.forward(ctx, m, err, "")
			}
			// Pause this retry topic until the record is due; records
			// behind it were written later and are due later.
			if !sleep(ctx, due.Sub(l.cfg.Now())) {
				return errStopping
			}
		}
	}
	// The record in hand is finished even when ctx ends; its work continues
	// the producer's trace.
	hctx, span := l.startSpan(ctx, m)
	defer span.End()
	waits := 0 // retries while a dependency is unavailable (outage.go)
	for retry := 0; ; retry++ {
		start := l.cfg.Now()
		var err error
		if first != nil {
			err, first = first, nil
		} else {
			actx, cancel := context.WithTimeout(hctx, l.cfg.AttemptTimeout)
			err = l.cfg.Handler(actx, m)
			cancel()
		}
		if err == nil {
			l.outageOver(ctx, waits)
			l.cfg.Metrics.observe(l.group, m.Topic, "ok", l.cfg.Now().Sub(start))
			return nil
		}
		span.RecordError(err)
		log := l.cfg.Logger.With("group", l.group, "topic", m.Topic, "partition", m.Partition,
			"offset", m.Offset, "evento_id", broker.Header(m, events.HeaderEventID))
		if wait, stopped := l.waitOutage(ctx, log, err, &waits); wait {
			if stopped {
				return errStopping
			}
			retry-- // not an attempt: the record is not at fault
			continue
		}
		if IsPermanent(err) {
			l.cfg.Metrics.observe(l.group, m.Topic, "poison", l.cfg.Now().Sub(start))
			log.ErrorContext(ctx, "record cannot be processed; sending it to the DLT", "err", err)
			return l.forward(ctx, m, err, "")
		}
		switch p := l.cfg.Policy.(type) {
		case Blocking:
			if retry >= p.Retries {
				l.cfg.Metrics.observe(l.group, m.Topic, "dlt", l.cfg.Now().Sub(start))
				log.ErrorContext(ctx, "retries exhausted; sending the record to the DLT", "retries", retry, "err", err)
				return l.forward(ctx, m, err, "")
			}
			l.cfg.Metrics.observe(l.group, m.Topic, "retry", l.cfg.Now().Sub(start))
			l.cfg.Metrics.Retries.WithLabelValues(l.group, strconv.Itoa(retry+1)).Inc()
			log.WarnContext(ctx, "handler failed; retrying in place", "retry", retry+1, "err", err)
			if !sleep(ctx, p.Backoff.Delay(retry+1)) {
				return errStopping
			}
		case RetryTopics:
			if l.level < len(p.Delays) {
				l.cfg.Metrics.observe(l.group, m.Topic, "retry", l.cfg.Now().Sub(start))
				l.cfg.Metrics.Retries.WithLabelValues(l.group, strconv.Itoa(l.level+1)).Inc()
				log.WarnContext(ctx, "handler failed; sending the record to a retry topic", "attempt", l.level+1, "err", err)
				return l.forward(ctx, m, err, broker.RetryTopic(l.mainTopic(m), p.Delays[l.level]))
			}
			l.cfg.Metrics.observe(l.group, m.Topic, "dlt", l.cfg.Now().Sub(start))
			log.ErrorContext(ctx, "attempts exhausted; sending the record to the DLT", "attempts", l.level+1, "err", err)
			return l.forward(ctx, m, err, "")
		default:
			return fmt.Errorf("consumer: unknown policy %T", l.cfg.Policy)
		}
	}
}

// startSpan opens the consumer span of m, continuing the producer's trace,
// on a context that outlives ctx: the record in hand is finished.
func (l *loop) startSpan(ctx context.Context, m kafka.Message) (context.Context, trace.Span) {
	hctx := tracing.WithTraceparent(context.WithoutCancel(ctx), broker.Header(m, events.HeaderTraceparent))
	return tracing.Tracer().Start(hctx, "consume "+m.Topic, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.destination.name", m.Topic),
			attribute.String("messaging.consumer.group.name", l.group),
			attribute.String("messaging.message.id", broker.Header(m, events.HeaderEventID))))
}

// mainTopic is the main topic m belongs to: the topic this loop consumes
// it from at level 0, the topic whose retry topic that is otherwise. It is
// found from the topic m was read from, never from m's headers: a forged
// or foreign retry record may carry no original topic, or one without
// retry topics or a DLT, and forwarding to a topic that does not exist
// would stall the partition for good.
func (l *loop) mainTopic(m kafka.Message) string {
	if l.level > 0 {
		for i, rt := range l.topics {
			if rt == m.Topic && i < len(l.cfg.Topics) {
				return l.cfg.Topics[i]
			}
		}
	}
	return m.Topic
}

// forward publishes m to target (a retry topic), or to the DLT of its main
// topic when target is empty, with its headers except any dead-letter and
// retry bookkeeping it arrived with (dlt.WithoutFailure), plus the origin
// and exception headers of facts: the origin is found from where the loop
// read m (dlt.OriginOf with mainTopic), never from m's headers, so a
// record cannot choose where its replay goes. It keeps trying until the
// broker acknowledges or ctx ends: committing a record that reached
// neither place would lose it.
func (l *loop) forward(ctx context.Context, m kafka.Message, cause error, target string) error {
	main := l.mainTopic(m)
	origin := dlt.OriginOf(m, main, l.cfg.Group)
	now := l.cfg.Now()
	// The record's timestamp and its due time come from one clock reading.
	// The same partition number as the record's, when the target has it
	// (the Publisher decides: broker.NewDLTWriter honours it).
	out := kafka.Message{Key: m.Key, Value: m.Value, Time: now, Partition: m.Partition}
	out.Headers = dlt.SetFailure(dlt.WithoutFailure(m.Headers), origin, cause)
	if target == "" {
		out.Topic = events.DLT(main)
		if l.level > 0 {
			// The attempts this loop's level stands for, not the header's.
			out.Headers = dlt.SetAttempts(out.Headers, l.level+1)
		}
		l.cfg.Metrics.DLT.WithLabelValues(main).Inc()
	} else {
		out.Topic = target
		rt := l.cfg.Policy.(RetryTopics)
		out.Headers = dlt.SetRetry(out.Headers, l.level+2, now.Add(rt.Delays[l.level]))
	}
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := l.cfg.Publisher.WriteMessages(wctx, out)
		cancel()
		if err == nil {
			return nil
		}
		l.cfg.Logger.ErrorContext(ctx, "cannot publish to the DLT or retry topic; the partition waits",
			"topic", out.Topic, "attempt", attempt, "err", err)
		if !sleep(ctx, forwardBackoff.Delay(attempt)) {
			return errStopping
		}
	}
}

// byPartition splits a batch into per-partition runs, keeping offset order.
func byPartition(batch []kafka.Message) [][]kafka.Message {
	type tp struct {
		topic     string
		partition int
	}
	index := map[tp]int{}
	var out [][]kafka.Message
	for _, m := range batch {
		k := tp{m.Topic, m.Partition}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m)
	}
	return out
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
