package consumer

import (
	"context"
	"time"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
)

// This file forwards a failed record to a retry topic or its DLT.

// forwardBackoff paces the retries of a forward to a retry topic or the DLT
// that the broker did not acknowledge.
var forwardBackoff = backoff.Exponential{Initial: time.Second, Multiplier: 2, Max: 15 * time.Second}

// mainTopic is the main topic m belongs to: the topic this loop consumes
// it from at level 0, the topic whose retry topic that is otherwise. It is
// found from the topic m was read from, never from m's headers: a forged
// or foreign retry record may carry no original topic, or one without
// retry topics or a DLT, and forwarding to a topic that does not exist
// would stall the partition for good.
func (l *loop) mainTopic(m broker.Record) string {
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
func (l *loop) forward(ctx context.Context, m broker.Record, cause error, target string) error {
	main := l.mainTopic(m)
	origin := dlt.OriginOf(m, main, l.cfg.Group)
	now := l.cfg.Now()
	// The same partition number as the record's, when the target has it
	// (the Publisher decides: broker.NewDLTProducer honours it).
	out := broker.Record{Key: m.Key, Value: m.Value, Partition: m.Partition}
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
		err := l.cfg.Publisher.Publish(wctx, out)
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
