// Package background runs what a test needs running (a service, a consumer
// loop, a relay) in a goroutine until the test ends: it cancels the
// goroutine's context at cleanup, waits for it to return and fails the test
// when it returns an error or does not return in time. It is the one copy of
// the run-in-goroutine, cancel and wait pattern.
package background

import (
	"context"
	"net"
	"testing"
	"time"
)

// StopWithin bounds the wait for a task to return once its context is
// cancelled.
const StopWithin = time.Minute

// ListenWithin bounds the wait for a served service's address.
const ListenWithin = 90 * time.Second

// Task is a function running in its own goroutine, started by Go or Serve.
type Task struct {
	name    string
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	stopped bool
}

// Go runs fn in a goroutine with a context that Stop, or the end of the
// test, cancels; then it waits for fn to return, failing tb if fn returned
// an error or did not return within StopWithin. name says what runs, in
// failures.
func Go(tb testing.TB, name string, fn func(ctx context.Context) error) *Task {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t := &Task{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.err = fn(ctx)
	}()
	tb.Cleanup(func() { t.Stop(tb) })
	return t
}

// Serve runs a service's Run like Go and waits for the address it listens
// on, which run reports through listening. It fails tb when run returns
// before listening or has not listened within ListenWithin.
func Serve(tb testing.TB, name string, run func(ctx context.Context, listening func(net.Addr)) error) (net.Addr, *Task) {
	tb.Helper()
	addrc := make(chan net.Addr, 1)
	t := Go(tb, name, func(ctx context.Context) error {
		return run(ctx, func(a net.Addr) { addrc <- a })
	})
	select {
	case a := <-addrc:
		return a, t
	case <-t.done:
		tb.Fatalf("%s returned before listening: %v", name, t.err)
	case <-time.After(ListenWithin):
		tb.Fatalf("%s not listening after %v", name, ListenWithin)
	}
	return nil, t
}

// Done is closed when the task's function has returned.
func (t *Task) Done() <-chan struct{} { return t.done }

// Err is what the task's function returned; it is meaningful once Done is
// closed.
func (t *Task) Err() error { return t.err }

// Stop cancels the task's context and waits for its function to return,
// failing tb if it returned an error or did not return within StopWithin.
// Calls after the first do nothing.
func (t *Task) Stop(tb testing.TB) {
	tb.Helper()
	if t.stopped {
		return
	}
	t.stopped = true
	t.cancel()
	select {
	case <-t.done:
		if t.err != nil {
			tb.Errorf("%s returned %v after shutdown, want nil", t.name, t.err)
		}
	case <-time.After(StopWithin):
		tb.Errorf("%s did not return within %v of cancellation", t.name, StopWithin)
	}
}
