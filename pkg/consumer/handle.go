package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// The partitions of a fetch are handled concurrently, each in offset order:
// records of one partition never overtake each other, and a partition
// waiting (a retry, an outage, a slow transaction) does not delay the
// records of the others fetched with it.
//
// Transaction markers (fetch.Marker) are committed with the records around
// them and never handed to a handler.
func (l *loop) process(ctx context.Context, fetch broker.Fetch, parts [][]broker.Record) ([]int, error) {
	handled := make([]int, len(parts))
	errs := make([]error, len(parts))
	run := func(i int) {
		done, err := l.processPartition(ctx, fetch, parts[i])
		handled[i], errs[i] = len(done), err
	}
	if len(parts) == 1 {
		run(0)
		return handled, errs[0]
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { run(i) })
	}
	wg.Wait()
	var err error
	for _, e := range errs {
		err = graver(err, e)
	}
	return handled, err
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
// prefix of all.
func (l *loop) processPartition(ctx context.Context, fetch broker.Fetch, all []broker.Record) ([]broker.Record, error) {
	isMarker := fetch.Marker
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
	var done []broker.Record
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
func (l *loop) handle(ctx context.Context, m broker.Record) error {
	return l.handleAfter(ctx, m, nil)
}

// handleAfter is handle for a record whose first attempt was already made
// elsewhere (a batch) and failed with first; nil means no attempt was made.
func (l *loop) handleAfter(ctx context.Context, m broker.Record, first error) error {
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
	index := map[tp]int{}
	var out [][]broker.Record
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
