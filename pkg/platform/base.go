package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
)

// DefaultInboxRetention is how long processed-event rows are kept by
// default: longer than a record can come back (the topics' 7-day
// retention, then a DLT record replayed up to 7 days later), so that a
// redelivery still finds its row.
const DefaultInboxRetention = 14 * 24 * time.Hour

// Config is what every service reads the same way.
type Config struct {
	// Service names the service in logs and its migration set.
	Service string
	// HTTPAddr is where the service listens (HTTP_ADDR).
	HTTPAddr string
	// DatabaseURL is the service's own database (DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds the pool (DATABASE_MAX_CONNS, default 20).
	DBMaxConns int
	// Kafka says how to reach the brokers (KAFKA_BROKERS,
	// KAFKA_MAX_MESSAGE_BYTES) and how to authenticate and encrypt
	// (KAFKA_SASL_*, KAFKA_TLS*: broker.SecurityFromEnv).
	Kafka broker.Config
	// Relay tunes the outbox relay (OUTBOX_*).
	Relay outbox.RelayConfig
	// MigrateOnStart applies migrations at start (MIGRATE_ON_START, default
	// true).
	MigrateOnStart bool
	// InboxRetention is how long the transfers projection's processed-event
	// rows are kept (INBOX_RETENTION, default DefaultInboxRetention).
	InboxRetention time.Duration
	// RelayDisabled turns the outbox relay off (OUTBOX_RELAY_ENABLED=false)
	// when Debezium's outbox router publishes instead. The zero value runs
	// the relay.
	RelayDisabled bool
	// Auth says how requests are authenticated and rate-limited
	// (AUTH_JWKS_URL or AUTH_JWKS_FILE, AUTH_ISSUER, AUTH_AUDIENCE,
	// RATE_LIMIT_RPS, RATE_LIMIT_BURST). There is no way to turn it off.
	Auth auth.Config
	// ShutdownDrain is how long the service keeps serving, /readyz
	// unready, once asked to stop (SHUTDOWN_DRAIN, default
	// DefaultShutdownDrain): longer than a load balancer's probe period, so
	// that it stops sending requests before the listener closes. Zero
	// closes the listener at once.
	ShutdownDrain time.Duration
}

// DefaultShutdownDrain is SHUTDOWN_DRAIN's default: longer than the
// readiness probe period of the Kubernetes manifests (5 s) and of most load
// balancers' health checks.
const DefaultShutdownDrain = 5 * time.Second

// MaxShutdownDrain bounds SHUTDOWN_DRAIN: the drain, the HTTP shutdown
// timeout and the consumers' last batch must fit in the orchestrator's
// grace period (45 s in deploy/k8s) before it kills the process.
const MaxShutdownDrain = time.Minute

// ValidateShutdownDrain refuses a negative drain or one above
// MaxShutdownDrain.
func ValidateShutdownDrain(d time.Duration) error {
	if d < 0 || d > MaxShutdownDrain {
		return fmt.Errorf("SHUTDOWN_DRAIN: %s is outside [0, %s]", d, MaxShutdownDrain)
	}
	return nil
}

// ConfigFromEnv reads the common configuration of service, listening on
// defaultAddr unless HTTP_ADDR says otherwise.
func ConfigFromEnv(env *Env, service, defaultAddr string) Config {
	security, err := broker.SecurityFromEnv(env.getenv)
	env.Check(err)
	return Config{
		Service:     service,
		HTTPAddr:    env.String("HTTP_ADDR", defaultAddr),
		DatabaseURL: env.Required("DATABASE_URL"),
		DBMaxConns:  env.Int("DATABASE_MAX_CONNS", 20),
		Kafka: broker.Config{
			Brokers:         broker.ParseBrokers(env.String("KAFKA_BROKERS", broker.DefaultAddr)),
			MaxMessageBytes: env.Int64("KAFKA_MAX_MESSAGE_BYTES", 1<<20),
			Security:        security,
		},
		Relay: outbox.RelayConfig{
			BatchSize:    env.Int("OUTBOX_BATCH_SIZE", 500),
			Workers:      env.Int("OUTBOX_WORKERS", 2),
			PollInterval: env.Duration("OUTBOX_POLL_INTERVAL", 500*time.Millisecond),
			Lease:        env.Duration("OUTBOX_LEASE", 30*time.Second),
			SendTimeout:  env.Duration("OUTBOX_SEND_TIMEOUT", 15*time.Second),
			MaxAttempts:  env.Int("OUTBOX_MAX_ATTEMPTS", 12),
			BackoffBase:  env.Duration("OUTBOX_BACKOFF_BASE", 500*time.Millisecond),
			BackoffMax:   env.Duration("OUTBOX_BACKOFF_MAX", time.Minute),
			Retention:    env.Duration("OUTBOX_RETENTION", 7*24*time.Hour),
		},
		MigrateOnStart: env.Bool("MIGRATE_ON_START", true),
		InboxRetention: env.Duration("INBOX_RETENTION", DefaultInboxRetention),
		RelayDisabled:  !env.Bool("OUTBOX_RELAY_ENABLED", true),
		Auth:           AuthFromEnv(env),
		ShutdownDrain:  shutdownDrainFromEnv(env),
	}
}

func shutdownDrainFromEnv(env *Env) time.Duration {
	d := env.Duration("SHUTDOWN_DRAIN", DefaultShutdownDrain)
	env.Check(ValidateShutdownDrain(d))
	return d
}

// AuthFromEnv reads the authentication configuration and records its
// problems in env: a service without one does not start.
//
//	AUTH_JWKS_URL     (one of the two  the token issuer's JWKS, fetched and cached
//	AUTH_JWKS_FILE     is required)    a JWKS file (the suite's own issuer)
//	AUTH_ISSUER       (required)       the iss every token must carry
//	AUTH_AUDIENCE     paysuite         a value the token's aud must contain
//	RATE_LIMIT_RPS    50               requests per second per client and instance
//	RATE_LIMIT_BURST  100              burst per client and instance
func AuthFromEnv(env *Env) auth.Config {
	c := auth.Config{
		JWKSURL:   env.String("AUTH_JWKS_URL", ""),
		JWKSFile:  env.String("AUTH_JWKS_FILE", ""),
		Issuer:    env.String("AUTH_ISSUER", ""),
		Audience:  env.String("AUTH_AUDIENCE", auth.DefaultAudience),
		RateRPS:   env.Float64("RATE_LIMIT_RPS", auth.DefaultRateRPS),
		RateBurst: env.Int("RATE_LIMIT_BURST", auth.DefaultRateBurst),
	}
	env.Check(c.Validate())
	return c
}

// Base is the part of a running service that every service has.
type Base struct {
	Cfg      Config
	Log      *slog.Logger
	DB       *postgres.DB
	Registry *prometheus.Registry
	Writer   *kafka.Writer
	Outbox   *outbox.Outbox
	Relay    *outbox.Relay
	Router   chi.Router
	// ConsumerMetrics are registered once per service and shared by its
	// consumers.
	ConsumerMetrics *consumer.Metrics
	HTTPMetrics     *httpapi.HTTPMetrics
	// Auth authenticates every request but the public ones; routes mount
	// through auth.Mount with their scopes.
	Auth *auth.Authenticator

	// stopping is set once Run begins to stop: /readyz answers 503.
	stopping  atomic.Bool
	closeOnce sync.Once
}

// Open connects to the database, applies the service's migrations, and
// builds the writer, outbox, relay and router. The caller runs it with Run,
// which closes it.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Base, error) {
	log = log.With("service", cfg.Service)
	if err := cfg.Relay.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateShutdownDrain(cfg.ShutdownDrain); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	authn, err := auth.New(ctx, cfg.Auth, log, reg)
	if err != nil {
		return nil, err
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL, int32(min(cfg.DBMaxConns, 1000))) //nolint:gosec // bounded
	if err != nil {
		_ = authn.Close(ctx)
		return nil, err
	}
	if cfg.MigrateOnStart {
		if err := db.Migrate(ctx, migrations.ForService(cfg.Service)...); err != nil {
			db.Close()
			_ = authn.Close(ctx)
			return nil, err
		}
	}
	b := &Base{
		Cfg:             cfg,
		Log:             log,
		DB:              db,
		Registry:        reg,
		Writer:          broker.NewWriter(cfg.Kafka),
		Outbox:          outbox.New(db),
		ConsumerMetrics: consumer.NewMetrics(reg),
		HTTPMetrics:     httpapi.NewHTTPMetrics(reg),
		Auth:            authn,
	}
	b.Relay = outbox.NewRelay(b.Outbox, b.Writer, cfg.Relay, log, outbox.NewMetrics(reg))
	b.Router = httpapi.NewRouter(log, b.HTTPMetrics, reg, b.Ready, authn.Middleware)
	return b, nil
}

// CheckShuttingDown is the readiness check that fails from the moment Run
// begins to stop: load balancers stop sending requests during the drain.
const CheckShuttingDown = "shutting-down"

// Ready reports whether the service can work: it is not stopping, the
// database answers, its migrations are applied, and a Kafka broker accepts
// a connection with the service's TLS and SASL settings (a wrong password
// makes it not ready). A failure is an *httpapi.NotReady naming the check
// ("shutting-down", "database", "migrations", "kafka"): /readyz shows the
// name and logs the cause.
func (b *Base) Ready(ctx context.Context) error {
	if b.stopping.Load() {
		return &httpapi.NotReady{Check: CheckShuttingDown, Err: errors.New("the service is stopping; draining")}
	}
	if err := b.DB.Ping(ctx); err != nil {
		return &httpapi.NotReady{Check: "database", Err: err}
	}
	sqlDB := b.DB.SQL()
	defer sqlDB.Close()
	pending, err := migrations.Pending(ctx, sqlDB, migrations.ForService(b.Cfg.Service)...)
	if err != nil {
		return &httpapi.NotReady{Check: "migrations", Err: err}
	}
	if pending {
		return &httpapi.NotReady{Check: "migrations", Err: errors.New("not applied")}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // within the probes' timeout
	defer cancel()
	if err := broker.Check(ctx, b.Cfg.Kafka); err != nil {
		return &httpapi.NotReady{Check: "kafka", Err: err}
	}
	return nil
}

// Consumer returns a consumer config with the service's brokers, logger and
// metrics filled in; the consumer writes its DLT and retry records with a
// writer of its own (broker.NewDLTWriter), which keeps their partitions.
func (b *Base) Consumer(group string, topics []string, h consumer.Handler, policy consumer.Policy) consumer.Config {
	return consumer.Config{
		Broker:  b.Cfg.Kafka,
		Group:   group,
		Topics:  topics,
		Handler: h,
		Policy:  policy,
		Logger:  b.Log,
		Metrics: b.ConsumerMetrics,
	}
}
