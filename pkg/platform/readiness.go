package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// ReadinessInterval is how often the readiness probe starts: /readyz
// answers from a result at most this old, and the dependencies see one
// probe per interval per process whatever the rate of /readyz calls.
const ReadinessInterval = time.Second

// readinessTimeout bounds one probe: within the orchestrators' probe
// timeouts, so that a hung dependency shows as one.
const readinessTimeout = 2 * time.Second

// readinessStale is the age past which a probe result is no longer
// believed: the probe loop is not running or is stuck.
const readinessStale = 5 * time.Second

// Readiness checks beyond those of the dependencies: CheckStarting before
// the first probe has finished, CheckProbe when the last result is stale,
// CheckShuttingDown from the moment Serve begins to stop (load balancers
// stop sending requests during the drain).
const (
	CheckStarting     = "starting"
	CheckProbe        = "probe"
	CheckShuttingDown = "shutting-down"
)

// Readiness is the process's one readiness probe of the service's
// dependencies and its last result, which /readyz answers from.
type Readiness struct {
	service  string
	db       *postgres.DB
	producer *broker.Producer
	log      *slog.Logger
	probes   *prometheus.CounterVec
	// stopping is set once Serve begins to stop: /readyz answers 503.
	stopping atomic.Bool

	mu       sync.Mutex
	err      error     // the last probe's result
	at       time.Time // when it finished; zero before the first
	migrated bool      // the migrations were found applied once
}

// NewReadiness is the readiness probe of service, whose database is db
// and whose Kafka client is producer; it registers readiness_probes_total
// on reg. It probes with their connections, none of its own: a wrong Kafka
// password fails it as it fails the relay's sends.
func NewReadiness(service string, db *postgres.DB, producer *broker.Producer, log *slog.Logger, reg prometheus.Registerer) *Readiness {
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readiness_probes_total",
		Help: "Readiness probes of the service's dependencies, by result (ready, not_ready); one a second whatever the rate of /readyz."},
		[]string{"result"})
	probes.WithLabelValues("ready")
	probes.WithLabelValues("not_ready")
	reg.MustRegister(probes)
	return &Readiness{service: service, db: db, producer: producer, log: log, probes: probes}
}

// Ready reports whether the service can work, from the last result of the
// readiness probe (Probe) and the stopping flag, without touching
// a dependency: /readyz costs the same whoever calls it how often. A
// failure is an *httpapi.NotReady naming the check ("shutting-down",
// "starting", "probe", "database", "migrations", "kafka"): /readyz shows
// the name, the probe logs the cause.
func (r *Readiness) Ready(context.Context) error {
	if r.stopping.Load() {
		return &httpapi.NotReady{Check: CheckShuttingDown, Err: errors.New("the service is stopping; draining")}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch age := time.Since(r.at); {
	case r.at.IsZero():
		return &httpapi.NotReady{Check: CheckStarting, Err: errors.New("no readiness probe has finished yet")}
	case age > readinessStale:
		return &httpapi.NotReady{Check: CheckProbe, Err: fmt.Errorf("the last readiness probe finished %s ago", age.Round(time.Second))}
	}
	return r.err
}

// Probe is the process's one readiness probe: at once (unless a probe has
// already finished: Serve probes once before it listens) and then
// every ReadinessInterval until ctx ends, it checks that the database
// answers, that the migrations are applied, and that a Kafka broker
// answers with the service's TLS and SASL settings, and keeps the result
// for Ready. Serve runs it beside the HTTP server; it logs each change of
// the result.
func (r *Readiness) Probe(ctx context.Context) error {
	var took time.Duration
	probe := func() {
		start := time.Now()
		r.probeOnce(ctx)
		took = time.Since(start)
	}
	r.mu.Lock()
	first := r.at.IsZero()
	r.mu.Unlock()
	if first {
		probe()
	}
	periodic.Every(ctx, func() time.Duration { return max(ReadinessInterval-took, 0) }, probe)
	return nil
}

// probeOnce checks the dependencies once and records the result.
func (r *Readiness) probeOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
	defer cancel()
	err := r.checkDependencies(ctx)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // stopping: the last result stands
	}
	r.mu.Lock()
	was, first := r.err, r.at.IsZero()
	r.err, r.at = err, time.Now()
	r.mu.Unlock()
	switch {
	case err != nil:
		r.probes.WithLabelValues("not_ready").Inc()
		if first || was == nil || was.Error() != err.Error() {
			r.log.WarnContext(ctx, "not ready", "err", err)
		}
	default:
		r.probes.WithLabelValues("ready").Inc()
		if first || was != nil {
			r.log.InfoContext(ctx, "ready")
		}
	}
}

// checkDependencies is one probe: the database, its migrations (until
// found applied: a running service never un-applies them), then Kafka.
func (r *Readiness) checkDependencies(ctx context.Context) error {
	if err := r.db.Ping(ctx); err != nil {
		return &httpapi.NotReady{Check: "database", Err: err}
	}
	r.mu.Lock()
	migrated := r.migrated
	r.mu.Unlock()
	if !migrated {
		sqlDB := r.db.SQL()
		pending, err := migrations.Pending(ctx, sqlDB, migrations.ForService(r.service)...)
		_ = sqlDB.Close() // the pool's connection goes back to the pool
		switch {
		case err != nil:
			return &httpapi.NotReady{Check: "migrations", Err: err}
		case pending:
			return &httpapi.NotReady{Check: "migrations", Err: errors.New("not applied")}
		}
		r.mu.Lock()
		r.migrated = true
		r.mu.Unlock()
	}
	if err := r.producer.Ping(ctx); err != nil {
		return &httpapi.NotReady{Check: "kafka", Err: err}
	}
	return nil
}
