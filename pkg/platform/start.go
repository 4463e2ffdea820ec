package platform

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/postgres"
)

// The start-up pieces a service's run calls in order: the metrics
// registry, the authenticator, the pool, the migrations and the router.
// The Kafka producer is NewProducer's, the relay NewRelay's, the readiness
// probe NewReadiness's; Serve runs them all and stops them in order.

// maxPoolConns bounds DATABASE_MAX_CONNS.
const maxPoolConns = 1000

// NewRegistry is the service's metrics registry, served at /metrics, with
// the Go runtime and process collectors and the Kafka clients' request
// counter (broker.Requests) registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), broker.Requests)
	return reg
}

// OpenPool connects to the service's database (DATABASE_URL) with a pool
// of DATABASE_MAX_CONNS connections, at most 1000. The caller closes it
// last, once everything that uses it has stopped.
func OpenPool(ctx context.Context, cfg Config) (*postgres.DB, error) {
	return postgres.Open(ctx, cfg.DatabaseURL, int32(min(cfg.DBMaxConns, maxPoolConns))) //nolint:gosec // bounded
}

// Migrate applies the migrations of service (migrations.ForService) to
// the database of db: the one migrate of the suite, behind MIGRATE_ON_START,
// every service binary's "migrate" and the operator CLI's
// "payments migrate".
func Migrate(ctx context.Context, db *postgres.DB, service string) error {
	if err := db.Migrate(ctx, migrations.ForService(service)...); err != nil {
		return fmt.Errorf("migrate %s: %w", service, err)
	}
	return nil
}

// MigrateURL is Migrate on the database at dsn, through a pool of its own
// that it closes: the commands that migrate and exit.
func MigrateURL(ctx context.Context, dsn, service string) error {
	db, err := postgres.Open(ctx, dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	return Migrate(ctx, db, service)
}

// NewAuthenticator builds the authenticator of every request but the
// public ones (AUTH_*), with its refusal limit (AUTH_REFUSED_*); its
// metrics go to reg. The caller closes it.
func NewAuthenticator(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*auth.Authenticator, error) {
	return auth.New(ctx, cfg.Auth, log, reg, auth.WithRefusalLimit(cfg.AuthRefusals))
}

// NewRouter is the service's HTTP router (httpapi.NewRouter): /healthz,
// /readyz answered by ready, /metrics from reg, every request bounded by
// HTTP_REQUEST_TIMEOUT and authenticated by authn. The service mounts its
// routes on it through auth.Mount, with their scopes.
func NewRouter(cfg Config, log *slog.Logger, reg *prometheus.Registry, ready *Readiness, authn *auth.Authenticator) chi.Router {
	return httpapi.NewRouter(log, httpapi.NewHTTPMetrics(reg), reg, ready.Ready, httpapi.Deadline(cfg.RequestTimeout), authn.Middleware)
}

// Close calls closeFn, a part's Close, and logs its error as a warning
// naming the part: at shutdown nothing is left to do about it.
func Close(log *slog.Logger, part string, closeFn func() error) {
	if err := closeFn(); err != nil {
		log.Warn("close "+part, "err", err)
	}
}
