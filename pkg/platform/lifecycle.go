package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
)

// Task is a long-running part of a service; it returns when ctx ends.
type Task func(ctx context.Context) error

// Parts are what Serve runs: the router the service mounted its routes on,
// the readiness probe its /readyz answers from, the relay (not run when
// OUTBOX_RELAY_ENABLED=false) and the service's other long-running tasks:
// its consumer loops (consumer.Run) and the loops that stop with them (the
// transfers' cleanup and re-apply loops).
type Parts struct {
	Router    chi.Router
	Readiness *Readiness
	Relay     Relay
	Tasks     []Task
}

// Serve serves HTTP on cfg.HTTPAddr (and runs the readiness probe beside
// it) and runs the tasks (consumers among them) and the relay of p until ctx is cancelled
// (SIGTERM: platform.Exit) or one of them fails. listening, if not nil,
// receives the HTTP address once bound. Parts without a router or a
// readiness probe, or without a relay that is enabled, do not start, nor
// does a router with a route that is neither public nor mounted with a
// scope.
//
// Stopping follows one order, stated here and nowhere else, the same for
// every service and for the all-in-one suite (whose services drain side by
// side):
//
//  1. /readyz answers 503 "not ready: shutting-down" at once, while the
//     listener keeps serving everything for cfg.ShutdownDrain: load
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
//  5. Serve returns; the service's run then closes, by its defers, what it
//     opened, in the other order: the Kafka producer (once the relay that
//     sends with it has stopped), the pool, then the authenticator, which
//     the run opens first so that a JWKS it cannot read stops the start
//     before any connection is opened.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr), p Parts) error {
	if err := ValidateShutdownDrain(cfg.ShutdownDrain); err != nil {
		return err
	}
	switch {
	case p.Router == nil || p.Readiness == nil:
		return fmt.Errorf("%s: Serve needs a router and a readiness probe", cfg.Service)
	case p.Relay == nil && !bool(cfg.RelayDisabled):
		return fmt.Errorf("%s: Serve needs the relay (or OUTBOX_RELAY_ENABLED=false)", cfg.Service)
	}
	if bad, err := auth.Uncovered(p.Router); err != nil || len(bad) > 0 {
		return fmt.Errorf("%s: routes without a scope %v (mount them through auth.Mount): %w", cfg.Service, bad, err)
	}
	// The parts stop by the order above, not by ctx: each stage has a
	// context of its own, cancelled in turn, that keeps ctx's values.
	base := context.WithoutCancel(ctx)
	failed := make(chan struct{})
	var failOnce sync.Once
	fail := func() { failOnce.Do(func() { close(failed) }) } // one part failing stops the service
	serve := func(ctx context.Context) error {
		return httpapi.Serve(ctx, cfg.HTTPAddr, p.Router, log, listening)
	}
	var relay []Task
	if !cfg.RelayDisabled {
		relay = append(relay, p.Relay.Run)
	} else {
		log.InfoContext(ctx, "outbox relay disabled (OUTBOX_RELAY_ENABLED=false): another publisher reads the outbox")
	}
	// One probe before the listener opens: /readyz never answers
	// "starting" to a process whose dependencies are up.
	p.Readiness.probeOnce(base)
	stages := []*stage{
		startStage(base, "http", fail, serve, p.Readiness.Probe),
		startStage(base, "tasks", fail, p.Tasks...),
		startStage(base, "relay", fail, relay...),
	}
	server := stages[0]

	select {
	case <-ctx.Done():
	case <-failed:
	}
	p.Readiness.stopping.Store(true)
	if d := cfg.ShutdownDrain; d > 0 {
		log.InfoContext(base, "stopping: /readyz unready, still serving for the drain window", "drain", d)
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
		log.DebugContext(base, "stopped", "part", s.name)
	}
	log.InfoContext(base, "service stopped")
	return errors.Join(errs...)
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
