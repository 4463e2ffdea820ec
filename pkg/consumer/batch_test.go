package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/test/support/poll"
)

// The one handler shape: a handler is given the records of one partition
// fetched together, and says how far it got with a BatchFailure
// (TestConsumerContract runs these against every policy).

// batchCalls records the values of the records of every handler call.
type batchCalls struct {
	mu    sync.Mutex
	calls [][]string
}

func (b *batchCalls) record(ms []broker.Record) {
	vs := make([]string, len(ms))
	for i, m := range ms {
		vs[i] = string(m.Value)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, vs)
}

func (b *batchCalls) get() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// with returns the calls that held v.
func (b *batchCalls) with(v string) [][]string {
	var out [][]string
	for _, c := range b.get() {
		if slices.Contains(c, v) {
			out = append(out, c)
		}
	}
	return out
}

// startBatches runs h as f's handler, recording each call's records first.
func startBatches(t *testing.T, f *fixture, pc policyCase, h func(ms []broker.Record, calls *batchCalls) error) (*batchCalls, *member) {
	t.Helper()
	calls := &batchCalls{}
	m := startMember(t, consumer.Config{
		Broker: f.kcfg, Group: f.group, Topics: []string{f.topic}, Policy: pc.policy, Publisher: f.writer,
		Handler: func(_ context.Context, ms []broker.Record) error {
			calls.record(ms)
			return h(ms, calls)
		},
	})
	return calls, m
}

// checkDead checks that the DLT record dead is value, from offset, with
// the exception message msg.
func checkDead(t *testing.T, dead broker.Record, value string, offset int64, msg string) {
	t.Helper()
	if o, _ := dlt.ClaimedOrigin(dead); string(dead.Value) != value || o.Offset != offset || dlt.ExceptionMessage(dead) != msg {
		t.Errorf("DLT record %q from offset %d, cause %q; want %q from %d, cause %q",
			dead.Value, o.Offset, dlt.ExceptionMessage(dead), value, offset, msg)
	}
}

// A batch whose handler stops at its third record: the two before it are
// committed and never handed to the handler again, the failed record is
// disposed of by the policy as if its own attempt had failed (the batch's
// attempt is its first; each retry hands it to the handler alone; then the
// DLT, with the BatchFailure's Err), and the records after it go to the
// handler again as one batch.
func testBatchStopsPartWay(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "a", "b", "bad", "d", "e")
	calls, m := startBatches(t, f, pc, func(ms []broker.Record, _ *batchCalls) error {
		for i, m := range ms {
			if string(m.Value) == "bad" {
				return &consumer.BatchFailure{Handled: i, Err: fmt.Errorf("downstream unavailable: %w", errTransient)}
			}
		}
		return nil
	})
	dead := readDLT(t, f, 1)[0]
	poll.True(t, 30*time.Second, "every offset committed", func() bool { return committed(t, f) == 5 })
	m.stop(t)

	got := calls.get()
	if len(got) == 0 || len(got[0]) != 5 {
		t.Fatalf("calls %v: the five records were not fetched as one batch", got)
	}
	for _, v := range []string{"a", "b"} {
		if n := len(calls.with(v)); n != 1 {
			t.Errorf("%s handed to the handler %d times, want once (calls %v)", v, n, got)
		}
	}
	bad := calls.with("bad")
	if len(bad) != pc.attempts {
		t.Errorf("bad attempted %d times, want %d (calls %v)", len(bad), pc.attempts, got)
	}
	for _, c := range bad[1:] {
		if diff := cmp.Diff([]string{"bad"}, c); diff != "" {
			t.Errorf("a retry of bad (-want +got):\n%s", diff)
		}
	}
	if rest := calls.with("d"); len(rest) != 2 || !slices.Equal(rest[1], []string{"d", "e"}) {
		t.Errorf("calls holding d %v, want the first batch then [d e]", rest)
	}
	checkDead(t, dead, "bad", 2, "downstream unavailable: transient")
}

// A plain error from a batch is a failure of its first record (Handled 0):
// a permanent one sends that record to the DLT at once, and the records
// after it go on as a batch.
func testBatchPlainError(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "x", "y")
	calls, m := startBatches(t, f, pc, func(ms []broker.Record, _ *batchCalls) error {
		if len(ms) > 1 {
			return consumer.Permanent(errors.New("batch refused"))
		}
		return nil
	})
	dead := readDLT(t, f, 1)[0]
	poll.True(t, 30*time.Second, "every offset committed", func() bool { return committed(t, f) == 2 })
	m.stop(t)
	if diff := cmp.Diff([][]string{{"x", "y"}, {"y"}}, calls.get()); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	checkDead(t, dead, "x", 0, "batch refused")
}

// A record fetched alone is a batch of one, attempted and retried as one.
func testBatchOfOne(t *testing.T, pc policyCase) {
	f := newFixture(t, pc)
	f.produce(t, "solo")
	calls, m := startBatches(t, f, pc, func(_ []broker.Record, calls *batchCalls) error {
		if len(calls.get()) == 1 {
			return errTransient
		}
		return nil
	})
	poll.True(t, 30*time.Second, "solo retried and committed", func() bool { return len(calls.get()) == 2 && committed(t, f) == 1 })
	m.stop(t)
	if diff := cmp.Diff([][]string{{"solo"}, {"solo"}}, calls.get()); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	if end := dltEnd(t, f); end != 0 {
		t.Errorf("DLT holds %d records, want 0", end)
	}
}
