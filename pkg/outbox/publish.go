package outbox

import (
	"context"
	"errors"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
)

// send publishes the batch and returns one error per event (nil: acked;
// errNotSent: not tried). Events go in one call, in seq order, so that the
// events of a key form one record batch of one partition and succeed or fail
// together. Events the broker refused before go afterwards, one call each,
// one after the other: the producer merges concurrent calls into one
// batch, and a poison event must not fail its neighbours again. An isolated event
// whose key's older event failed in the first call is not sent: it would
// overtake it.
//
// No call runs past sendBy: the lease is the relay's only while it lasts, and
// a send after it could race the relay that takes the events over. What is
// left at sendBy is not sent.
func (r *Relay) send(ctx context.Context, batch []claimed, sendBy time.Time) []error {
	results := make([]error, len(batch))
	var together []int
	var alone []int
	for i, c := range batch {
		if c.isolate {
			alone = append(alone, i)
		} else {
			together = append(together, i)
		}
	}
	call := func(idx []int) {
		deadline := time.Now().Add(r.cfg.SendTimeout)
		if sendBy.Before(deadline) {
			deadline = sendBy
		}
		if time.Until(deadline) <= 0 {
			for _, i := range idx {
				results[i] = errNotSent
			}
			return
		}
		recs := make([]broker.Record, len(idx))
		spans := make([]trace.Span, len(idx))
		for j, i := range idx {
			recs[j], spans[j] = publishSpan(ctx, batch[i])
		}
		defer func() {
			for j, i := range idx {
				if results[i] != nil {
					spans[j].SetStatus(codes.Error, results[i].Error())
				}
				spans[j].End()
			}
		}()
		sctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		err := r.pub.Publish(sctx, recs...)
		var perrs broker.PublishErrors
		switch {
		case err == nil:
		case errors.As(err, &perrs) && len(perrs) == len(idx):
			for j, i := range idx {
				results[i] = perrs[j]
			}
		default:
			for _, i := range idx {
				results[i] = err
			}
		}
	}
	if len(together) > 0 {
		call(together)
	}
	for _, i := range alone {
		if olderFailed(batch, results, i) {
			results[i] = errNotSent
			continue
		}
		call([]int{i})
	}
	return results
}

// olderFailed reports whether an event of batch[i]'s key older than it
// (earlier in the seq-sorted batch) was not acked.
func olderFailed(batch []claimed, results []error, i int) bool {
	for j := range i {
		if results[j] != nil && batch[j].topic == batch[i].topic && batch[j].key == batch[i].key {
			return true
		}
	}
	return false
}

// publishSpan starts the producer span of one event, a child of the trace
// the event was enqueued in, and returns the record carrying that span's
// traceparent.
func publishSpan(ctx context.Context, c claimed) (broker.Record, trace.Span) {
	parent := tracing.WithTraceparent(context.WithoutCancel(ctx), c.headers[events.HeaderTraceparent])
	sctx, span := tracing.Tracer().Start(parent, "outbox publish "+c.topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", c.topic),
			attribute.String("messaging.message.id", c.id.String())))
	m := toRecord(c)
	if tp := tracing.Traceparent(sctx); tp != "" {
		m.Headers = broker.SetHeader(m.Headers, events.HeaderTraceparent, tp)
	}
	return m, span
}

func toRecord(c claimed) broker.Record {
	hs := make([]broker.Header, 0, 2+len(c.headers))
	hs = append(hs,
		broker.Header{Key: events.HeaderEventID, Value: []byte(c.id.String())},
		broker.Header{Key: events.HeaderEventType, Value: []byte(c.eventType)},
	)
	names := make([]string, 0, len(c.headers))
	for k := range c.headers {
		if k != events.HeaderEventID && k != events.HeaderEventType {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		hs = append(hs, broker.Header{Key: k, Value: []byte(c.headers[k])})
	}
	return broker.Record{Topic: c.topic, Key: []byte(c.key), Value: c.payload, Headers: hs}
}
