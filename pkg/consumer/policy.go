package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
)

// Handler processes records of one topic fetched together, each
// partition's in offset order: the fetch's records of the topic, or the
// rest of one partition's after an attempt at them stopped part way; 1 to
// Config.MaxBatch of them, a batch of one being the single-record case. It
// must be idempotent: a record may be delivered again after a crash or a
// rebalance. nil means every record is done; *BatchFailure says how far it
// got; any other error is a BatchFailure with Handled 0.
type Handler func(ctx context.Context, ms []broker.Record) error

// Traceparent is the trace context a Handler gives the work of ms[i] (the
// events it writes): "" for a batch of one, whose ctx carries the record's
// span (the loop's) for the outbox to take, and ms[i]'s traceparent header
// in a longer batch, whose ctx carries none: one ctx cannot carry the
// traces of several records.
func Traceparent(ms []broker.Record, i int) string {
	if len(ms) == 1 {
		return ""
	}
	return ms[i].Header(events.HeaderTraceparent)
}

// BatchFailure is a Handler's error when its batch stopped part way:
// ms[:Handled] are done, ms[Handled] was attempted once and failed with Err
// (the attempt is not made again at once: a webhook already called, say),
// and ms[Handled+1:] were not tried. The loop commits the first ones,
// disposes of ms[Handled] by its policy exactly as if its own attempt had
// failed with Err (its retries call the Handler with it alone), and hands
// the rest to the Handler again as a batch.
type BatchFailure struct {
	Handled int
	Err     error
}

func (e *BatchFailure) Error() string {
	return fmt.Sprintf("batch stopped at record %d: %v", e.Handled, e.Err)
}
func (e *BatchFailure) Unwrap() error { return e.Err }

// StoppedAt is a Handler's error when it finished its first handled
// records and stopped at the next with err: a BatchFailure, or nil when
// err is.
func StoppedAt(handled int, err error) error {
	if err == nil {
		return nil
	}
	return &BatchFailure{Handled: handled, Err: err}
}

// DecodeUntil decodes ms in order with decode and stops at the first record
// it refuses (a poison record): it returns the values of the records before
// it and that record's error, nil when it decoded them all. A Handler that
// decodes first handles the values, then returns StoppedAt(len(values), err).
func DecodeUntil[T any](ms []broker.Record, decode func(i int, m broker.Record) (T, error)) ([]T, error) {
	vs := make([]T, 0, len(ms))
	for i, m := range ms {
		v, err := decode(i, m)
		if err != nil {
			return vs, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

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

// Policy says what happens to a record whose handler failed.
type Policy interface{ isPolicy() }

// Blocking retries a failed record in place Retries times with Backoff while
// its partition waits, then sends it to the DLT.
type Blocking struct {
	Backoff backoff.Exponential
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
var BlockingRetries = Blocking{Backoff: backoff.Exponential{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 15 * time.Second}, Retries: 5}

// DelayedRetryTopics moves a failed record aside to retry topics after 1 s,
// 2 s and 4 s, 4 attempts in all, then the DLT (CONTRACTS.md section 7):
// the partition does not wait, for consumers (notifications) where order
// does not matter.
var DelayedRetryTopics = RetryTopics{Delays: broker.RetryDelays}
