package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
)

// process handles the records of a fetch, parts (its records split by
// partition, byPartition), and returns how many of each part were handled:
// the prefix of each that may be committed.
//
// The records of one topic go to the Handler first as one batch, each
// partition's in offset order: one transaction for all the topic's
// partitions in the fetch, whose cost per record falls as fetches grow
// with the load. A batch never holds two topics: a transfer's events of
// different topics (its hold's reservation and its capture) are never
// handled in one batch, as they never were in one partition. When that
// attempt stops part way (a BatchFailure, or any error), the records it
// finished are kept and the partitions go on concurrently, each in offset
// order, from where the attempt left them: the failed record is disposed
// of by the policy with the attempt counting as its first, and a partition
// waiting for a retry or an outage does not delay the records of the
// others fetched with it. The topics of a fetch are handled concurrently.
//
// Transaction markers (fetch.Marker) are committed with the records around
// them and never handed to a handler.
func (l *loop) process(ctx context.Context, fetch broker.Fetch, parts [][]broker.Record) ([]int, error) {
	handled := make([]int, len(parts))
	errs := make([]error, len(parts))
	topics := byTopic(parts)
	if len(topics) == 1 {
		l.processTopic(ctx, fetch, parts, topics[0], handled, errs)
	} else {
		var wg sync.WaitGroup
		for _, idx := range topics {
			wg.Go(func() { l.processTopic(ctx, fetch, parts, idx, handled, errs) })
		}
		wg.Wait()
	}
	var err error
	for _, e := range errs {
		err = graver(err, e)
	}
	return handled, err
}

// processTopic handles parts[i] for each i in idx, the partitions of one
// topic (process), writing handled[i] and errs[i].
func (l *loop) processTopic(ctx context.Context, fetch broker.Fetch, parts [][]broker.Record, idx []int, handled []int, errs []error) {
	skip := make([]int, len(idx))     // records of each part the topic's attempt finished
	firsts := make([]error, len(idx)) // the attempt's failure, for the part it stopped in
	if len(idx) > 1 && l.level == 0 && ctx.Err() == nil && !l.rebalanceWaiting.Load() {
		var ms []broker.Record
		var owner []int // owner[j]: the index in idx of the part of ms[j]
		for n, i := range idx {
			for _, m := range parts[i] {
				if !fetch.Marker(m) {
					ms, owner = append(ms, m), append(owner, n)
				}
			}
		}
		if len(ms) > 1 {
			k, failed := l.attemptBatch(ctx, ms)
			if failed == nil {
				for _, i := range idx {
					handled[i] = len(parts[i])
				}
				return
			}
			for _, n := range owner[:k] {
				skip[n]++
			}
			firsts[owner[k]] = failed
		}
	}
	run := func(n int) {
		i := idx[n]
		done, err := l.processPartition(ctx, fetch, parts[i], skip[n], firsts[n])
		handled[i], errs[i] = len(done), err
	}
	if len(idx) == 1 {
		run(0)
		return
	}
	var wg sync.WaitGroup
	for n := range idx {
		wg.Go(func() { run(n) })
	}
	wg.Wait()
}

// byTopic groups the indexes of parts by topic, in order of first appearance.
func byTopic(parts [][]broker.Record) [][]int {
	idx := make([]int, len(parts))
	for i := range idx {
		idx[i] = i
	}
	return groupBy(idx, func(i int) string { return parts[i][0].Topic })
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
// and returns the records handled (transaction markers among them): a
// prefix of all. The first skip records were finished already (by the
// fetch's attempt), and first, when not nil, is the failure of an attempt
// already made at the record after them, which counts as its first.
//
// The records go to the Handler as one batch. When it stops part way (a
// BatchFailure; any other error stops it at its first record), the records
// it finished are kept, the one that failed is disposed of by the policy
// (handle, with the batch's attempt as its first), and the rest go to the
// Handler again as a batch. A batch of one is handle's first attempt; a
// retry topic's loop takes one record at a time, each waiting for its due
// time.
func (l *loop) processPartition(ctx context.Context, fetch broker.Fetch, all []broker.Record, skip int, first error) ([]broker.Record, error) {
	var part []broker.Record
	var at []int // at[n]: the index in all of part[n]; all[:at[n]] is done when part[n] is next
	for i, m := range all {
		if !fetch.Marker(m) {
			part, at = append(part, m), append(at, i)
		}
	}
	done := func(n int) []broker.Record { // the prefix of all done when part[:n] is
		if n >= len(part) {
			return all
		}
		return all[:at[n]]
	}
	if skip >= len(part) {
		return all, nil
	}
	if l.rebalanceWaiting.Load() {
		// Start no more partitions of this batch: a rebalance waits for it
		// (and the member would be dropped from the group past the
		// rebalance timeout).
		if skip == 0 {
			return nil, errRebalance
		}
		return done(skip), errRebalance
	}
	for n := skip; n < len(part); n++ { // n: records of part handled
		if ctx.Err() != nil {
			// Stopping: the record in hand was finished; the rest of
			// the fetch is delivered again to whoever consumes next.
			return done(n), errStopping
		}
		if n > skip && l.rebalanceWaiting.Load() {
			// A rebalance waits: with every partition of the fetch in
			// hand at once, each stops after its records in hand.
			return done(n), errRebalance
		}
		failed := first // the failure of the batch's attempt at part[n]
		first = nil
		if rest := part[n:]; failed == nil && len(rest) > 1 && l.level == 0 {
			var k int
			if k, failed = l.attemptBatch(ctx, rest); failed == nil {
				return all, nil
			}
			n += k
		}
		if err := l.handle(ctx, part[n], failed); err != nil {
			return done(n), err
		}
	}
	return all, nil
}

// attemptBatch runs the Handler once on ms (a fetch's records of one topic,
// or the rest of one partition's) and returns how many of them it finished and,
// when that is not all, the failure of the attempt at ms[k].
func (l *loop) attemptBatch(ctx context.Context, ms []broker.Record) (k int, failed error) {
	start := l.cfg.Now()
	spans := make([]trace.Span, len(ms))
	for i, m := range ms {
		_, spans[i] = l.startSpan(ctx, m)
	}
	// The batch in hand is finished even when ctx ends.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.AttemptTimeout)
	err := l.cfg.Handler(bctx, ms)
	cancel()
	for _, sp := range spans {
		if err != nil {
			sp.RecordError(err)
		}
		sp.End()
	}
	l.cfg.Metrics.BatchSize.Observe(float64(len(ms)))
	k, failed = failure(err, len(ms))
	for _, m := range ms[:k] {
		l.cfg.Metrics.observe(l.group, m.Topic, "ok", l.cfg.Now().Sub(start))
	}
	if failed != nil {
		l.cfg.Logger.WarnContext(ctx, "batch stopped at a failing record; the policy disposes of it, the rest go on as a batch",
			"group", l.group, "topic", ms[k].Topic, "partition", ms[k].Partition, "offset", ms[k].Offset, "records", len(ms), "err", err)
	}
	return k, failed
}

// failure reads the Handler's error err on n records: how many it
// finished, and the failure of the next (nil when it finished all).
func failure(err error, n int) (int, error) {
	if err == nil {
		return n, nil
	}
	if bf, ok := errors.AsType[*BatchFailure](err); ok && bf.Handled >= 0 && bf.Handled < n && bf.Err != nil {
		return bf.Handled, bf.Err
	}
	return 0, err
}

// handle runs the Handler on m alone until it succeeds or m is disposed of
// (retry topic or DLT). first, when not nil, is the failure of an attempt
// already made (by a batch), which counts as its first. It returns
// errStopping when ctx ends first; m must then not be committed.
func (l *loop) handle(ctx context.Context, m broker.Record, first error) error {
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
			_, err = failure(l.cfg.Handler(actx, []broker.Record{m}), 1)
			cancel()
		}
		if err == nil {
			l.outageOver(ctx, waits)
			l.cfg.Metrics.observe(l.group, m.Topic, "ok", l.cfg.Now().Sub(start))
			return nil
		}
		span.RecordError(err)
		log := l.cfg.Logger.With("group", l.group, "topic", m.Topic, "partition", m.Partition,
			"offset", m.Offset, "evento_id", m.Header(events.HeaderEventID))
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
func (l *loop) startSpan(ctx context.Context, m broker.Record) (context.Context, trace.Span) {
	hctx := tracing.WithTraceparent(context.WithoutCancel(ctx), m.Header(events.HeaderTraceparent))
	return tracing.Tracer().Start(hctx, "consume "+m.Topic, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.destination.name", m.Topic),
			attribute.String("messaging.consumer.group.name", l.group),
			attribute.String("messaging.message.id", m.Header(events.HeaderEventID))))
}

// byPartition splits a batch into per-partition runs, keeping offset order.
func byPartition(batch []broker.Record) [][]broker.Record {
	type tp struct {
		topic     string
		partition int32
	}
	return groupBy(batch, func(m broker.Record) tp { return tp{m.Topic, m.Partition} })
}

// groupBy splits xs by key, in order of each key's first appearance, each
// group in the order of xs.
func groupBy[K comparable, V any](xs []V, key func(V) K) [][]V {
	index := map[K]int{}
	var out [][]V
	for _, x := range xs {
		k := key(x)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
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
