package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
)

// Task is a long-running part of a service; it returns when ctx ends.
type Task func(ctx context.Context) error

// Run serves HTTP (and runs the readiness probe beside it) and runs the
// consumers and the relay
// until ctx is cancelled (SIGTERM: platform.Exit) or one of them fails.
// consumers are the service's consumer loops (consumer.Run) and the tasks
// that stop with them (the transfers' inbox cleanup). listening, if
// not nil, receives the HTTP address once bound. A router with a route
// that is neither public nor mounted with a scope does not start.
//
// Stopping follows one order, stated here and nowhere else, the same for
// every service and for the all-in-one suite (whose services drain side by
// side):
//
//  1. /readyz answers 503 "not ready: shutting-down" at once, while the
//     listener keeps serving everything for Cfg.ShutdownDrain: load
//     balancers take the instance out before it stops accepting, and the
//     requests that race them are still answered. Consumers and the relay
//     keep working meanwhile.
//  2. The HTTP server stops accepting and waits up to
//     httpapi.ShutdownTimeout for the requests in flight.
//  3. The consumers finish the record or batch in hand, commit its
//     offsets and leave their groups, so that their partitions move to
//     the other members at once; the other consumer tasks stop with them.
//  4. The relay publishes and marks the batch in hand (the events the
//     last requests and records enqueued included) and releases its
//     liveness session.
//  5. Close: the Kafka producer, the pool and the authenticator close.
func (b *Base) Run(ctx context.Context, listening func(net.Addr), consumers ...Task) error {
	defer b.Close()
	if bad, err := auth.Uncovered(b.Router); err != nil || len(bad) > 0 {
		return fmt.Errorf("%s: routes without a scope %v (mount them through auth.Mount): %w", b.Cfg.Service, bad, err)
	}
	// The parts stop by the order above, not by ctx: each stage has a
	// context of its own, cancelled in turn, that keeps ctx's values.
	base := context.WithoutCancel(ctx)
	failed := make(chan struct{})
	var failOnce sync.Once
	fail := func() { failOnce.Do(func() { close(failed) }) } // one part failing stops the service
	serve := func(ctx context.Context) error {
		return httpapi.Serve(ctx, b.Cfg.HTTPAddr, b.Router, b.Log, listening)
	}
	var relay []Task
	if !b.Cfg.RelayDisabled {
		relay = append(relay, b.Relay.Run)
	} else {
		b.Log.InfoContext(ctx, "outbox relay disabled (OUTBOX_RELAY_ENABLED=false): another publisher reads the outbox")
	}
	// One probe before the listener opens: /readyz never answers
	// "starting" to a process whose dependencies are up.
	b.probeOnce(base)
	stages := []*stage{
		startStage(base, "http", fail, serve, b.ProbeReadiness),
		startStage(base, "consumers", fail, consumers...),
		startStage(base, "relay", fail, relay...),
	}
	server := stages[0]

	select {
	case <-ctx.Done():
	case <-failed:
	}
	b.stopping.Store(true)
	if d := b.Cfg.ShutdownDrain; d > 0 {
		b.Log.InfoContext(base, "stopping: /readyz unready, still serving for the drain window", "drain", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-server.done: // the server failed: nothing to drain
		}
		t.Stop()
	}
	var errs []error
	for _, s := range stages {
		errs = append(errs, s.stop()...)
		b.Log.DebugContext(base, "stopped", "part", s.name)
	}
	b.Log.InfoContext(base, "service stopped")
	return errors.Join(errs...)
}

// Close releases the producer, the pool and the authenticator, in that
// order. Run calls it last.
func (b *Base) Close() {
	b.closeOnce.Do(func() {
		if err := b.Producer.Close(); err != nil {
			b.Log.Warn("close kafka producer", "err", err)
		}
		b.DB.Close()
		if err := b.Auth.Close(context.Background()); err != nil {
			b.Log.Warn("close authenticator", "err", err)
		}
	})
}

// stage is a group of tasks that start together and stop together.
type stage struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed once every task returned
	errs   []error       // read after done
}

// startStage runs tasks, each on its own goroutine, under a context
// derived from base, calling fail when one returns an error.
func startStage(base context.Context, name string, fail func(), tasks ...Task) *stage {
	ctx, cancel := context.WithCancel(base)
	s := &stage{name: name, cancel: cancel, done: make(chan struct{})}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Go(func() {
			err := t(ctx)
			if err == nil || errors.Is(err, context.Canceled) {
				return
			}
			fail()
			mu.Lock()
			s.errs = append(s.errs, err)
			mu.Unlock()
		})
	}
	go func() { wg.Wait(); close(s.done) }()
	return s
}

// stop cancels the stage's tasks, waits for them and returns their errors.
func (s *stage) stop() []error {
	s.cancel()
	<-s.done
	return s.errs
}
