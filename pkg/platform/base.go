package platform

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/inbox"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
)

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
	// KAFKA_MAX_MESSAGE_BYTES).
	Kafka broker.Config
	// Relay tunes the outbox relay (OUTBOX_*).
	Relay outbox.RelayConfig
	// MigrateOnStart applies migrations at start (MIGRATE_ON_START, default
	// true).
	MigrateOnStart bool
	// InboxRetention is how long processed-event rows are kept
	// (INBOX_RETENTION, default 14 days: longer than a record can come
	// back).
	InboxRetention time.Duration
	// RelayDisabled turns the outbox relay off (OUTBOX_RELAY_ENABLED=false)
	// when Debezium's outbox router publishes instead. The zero value runs
	// the relay.
	RelayDisabled bool
}

// ConfigFromEnv reads the common configuration of service, listening on
// defaultAddr unless HTTP_ADDR says otherwise.
func ConfigFromEnv(env *Env, service, defaultAddr string) Config {
	return Config{
		Service:     service,
		HTTPAddr:    env.String("HTTP_ADDR", defaultAddr),
		DatabaseURL: env.Required("DATABASE_URL"),
		DBMaxConns:  env.Int("DATABASE_MAX_CONNS", 20),
		Kafka: broker.Config{
			Brokers:         broker.ParseBrokers(env.String("KAFKA_BROKERS", "localhost:9092")),
			MaxMessageBytes: env.Int64("KAFKA_MAX_MESSAGE_BYTES", 1<<20),
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
		InboxRetention: env.Duration("INBOX_RETENTION", inbox.DefaultRetention),
		RelayDisabled:  !env.Bool("OUTBOX_RELAY_ENABLED", true),
	}
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
	// ConsumerMetrics and InboxDuplicates are registered once per service
	// and shared by its consumers.
	ConsumerMetrics *consumer.Metrics
	InboxDuplicates inbox.DuplicatesCounter
	HTTPMetrics     *httpapi.HTTPMetrics

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
	db, err := postgres.Open(ctx, cfg.DatabaseURL, int32(min(cfg.DBMaxConns, 1000))) //nolint:gosec // bounded
	if err != nil {
		return nil, err
	}
	if cfg.MigrateOnStart {
		if err := db.Migrate(ctx, migrations.ForService(cfg.Service)...); err != nil {
			db.Close()
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b := &Base{
		Cfg:             cfg,
		Log:             log,
		DB:              db,
		Registry:        reg,
		Writer:          broker.NewWriter(cfg.Kafka),
		Outbox:          outbox.New(db),
		ConsumerMetrics: consumer.NewMetrics(reg),
		InboxDuplicates: inbox.NewDuplicatesCounter(reg),
		HTTPMetrics:     httpapi.NewHTTPMetrics(reg),
	}
	b.Relay = outbox.NewRelay(b.Outbox, b.Writer, cfg.Relay, log, outbox.NewMetrics(reg))
	b.Router = httpapi.NewRouter(log, b.HTTPMetrics, reg, b.Ready)
	return b, nil
}

// Ready reports whether the service can work: the database answers, its
// migrations are applied, and a Kafka broker answers. A failure is an
// *httpapi.NotReady naming the check ("database", "migrations", "kafka"):
// /readyz shows the name and logs the cause.
func (b *Base) Ready(ctx context.Context) error {
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
	if len(b.Cfg.Kafka.Brokers) == 0 {
		return &httpapi.NotReady{Check: "kafka", Err: errors.New("no brokers configured")}
	}
	d := net.Dialer{Timeout: time.Second}
	var lastErr error
	for _, addr := range b.Cfg.Kafka.Brokers {
		dial := d.DialContext
		if b.Cfg.Kafka.Dial != nil {
			dial = b.Cfg.Kafka.Dial
		}
		conn, err := dial(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		lastErr = err
	}
	return &httpapi.NotReady{Check: "kafka", Err: lastErr}
}

// Task is a long-running part of a service; it returns when ctx ends.
type Task func(ctx context.Context) error

// Run serves HTTP, runs the relay and the given tasks until ctx is
// cancelled or one of them fails, then shuts down in order: HTTP stops
// accepting, consumers finish the record in hand and commit, the relay
// finishes its batch, and the writer and the pool close last. listening, if
// not nil, receives the HTTP address once bound.
func (b *Base) Run(ctx context.Context, listening func(net.Addr), tasks ...Task) error {
	defer b.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := []Task{func(ctx context.Context) error { return httpapi.Serve(ctx, b.Cfg.HTTPAddr, b.Router, b.Log, listening) }}
	if !b.Cfg.RelayDisabled {
		all = append(all, b.Relay.Run)
	} else {
		b.Log.InfoContext(ctx, "outbox relay disabled (OUTBOX_RELAY_ENABLED=false): another publisher reads the outbox")
	}
	all = append(all, func(ctx context.Context) error {
		retention := b.Cfg.InboxRetention
		if retention <= 0 {
			retention = inbox.DefaultRetention
		}
		return inbox.CleanupLoop(ctx, b.DB, retention, time.Minute, b.Log)
	})
	all = append(all, tasks...)
	errc := make(chan error, len(all))
	for _, t := range all {
		go func() {
			err := t(ctx)
			if err != nil {
				cancel() // one part failing stops the service
			}
			errc <- err
		}()
	}
	var errs []error
	for range all {
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	b.Log.InfoContext(ctx, "service stopped")
	return errors.Join(errs...)
}

// Close releases the writer and the pool. Run calls it.
func (b *Base) Close() {
	b.closeOnce.Do(func() {
		if err := b.Writer.Close(); err != nil {
			b.Log.Warn("close kafka writer", "err", err)
		}
		b.DB.Close()
	})
}

// Consumer returns a consumer config with the service's brokers, writer,
// logger and metrics filled in.
func (b *Base) Consumer(group string, topics []string, h consumer.Handler, policy consumer.Policy) consumer.Config {
	return consumer.Config{
		Broker:    b.Cfg.Kafka,
		Group:     group,
		Topics:    topics,
		Handler:   h,
		Policy:    policy,
		Publisher: b.Writer,
		Logger:    b.Log,
		Metrics:   b.ConsumerMetrics,
	}
}
