// Package antifraud is the antifraud service: it consumes
// TransferenciaSolicitada (consumer group "antifraude"), scores each
// transfer with the risk engine, and, in one database transaction, stores
// the decision and enqueues TransferenciaAnalisada (score below the
// threshold) or TransferenciaRejeitada with BLOQUEADA_ANTIFRAUDE in its
// outbox; the input offset is committed after that transaction. Undecodable
// requests go to the requested topic's DLT.
//
// Run starts it; cmd/antifraud is its binary, and the all-in-one binary
// calls Run too.
package antifraud

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/consume"
	"github.com/paysuite/payments/services/antifraud/internal/opsweb"
	"github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

// Service is the service's name: its logs and its migration set.
const Service = "antifraud"

// DefaultHTTPAddr is the service's port (CONTRACTS.md section 0).
const DefaultHTTPAddr = ":8082"

// DefaultGroup is the consumer group of CONTRACTS.md section 3.
const DefaultGroup = "antifraude"

// Config is the antifraud service's configuration.
type Config struct {
	platform.Config
	// Topics are the topics read (Requested) and written (Analysed,
	// Rejected); events.DefaultTopics in production.
	Topics events.Topics
	// Group is the consumer group; DefaultGroup in production.
	Group string
	// Risk parameterises the risk engine.
	Risk risk.Config
	// BatchMax is the most records of one fetch decided in one
	// database transaction; 1 decides each record alone.
	BatchMax int `env:"ANTIFRAUD_BATCH_MAX" help:"records of one fetch decided per transaction, 1..1000; 1 decides one per transaction"`
}

// DefaultBatchMax is how many records of one fetch are decided in one
// transaction unless ANTIFRAUD_BATCH_MAX says otherwise.
const DefaultBatchMax = 50

// DefaultConfig is the configuration before the environment is read.
func DefaultConfig() Config {
	return Config{
		Config:   platform.DefaultConfig(Service, DefaultHTTPAddr),
		Topics:   events.DefaultTopics,
		Group:    DefaultGroup,
		Risk:     risk.DefaultConfig(),
		BatchMax: DefaultBatchMax,
	}
}

// Variables are the variables ConfigFromEnv reads, with their defaults and
// descriptions (the binary's --help).
func Variables() []envconfig.Var { return envconfig.Vars(DefaultConfig()) }

// ConfigFromEnv reads the configuration declared by Config's tags and the
// risk engine's (see Variables, or "antifraud --help"). Every problem is
// reported at once, in one error.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	errs := []error{envconfig.Parse(getenv, &cfg, platform.ParseOptions()...), cfg.Complete()}
	if cfg.BatchMax < 1 || cfg.BatchMax > 1000 {
		errs = append(errs, fmt.Errorf("ANTIFRAUD_BATCH_MAX: %d is not within 1..1000", cfg.BatchMax))
	}
	if _, err := risk.New(cfg.Risk); err != nil {
		errs = append(errs, err)
	}
	return cfg, envconfig.Join(errs...)
}

// Run runs the service with cfg, as ConfigFromEnv gives it (Run checks
// nothing again), and log (platform.Main reads them and starts tracing)
// until ctx is cancelled. It builds, in order, the risk
// engine, the metrics registry and the authenticator, the pool and its
// migrations, the Kafka producer, the outbox and its relay, the analysis
// service, the consumer of the requested topic and the router (/healthz,
// /readyz, /metrics and the operator routes); platform.Serve runs them and
// stops them in its stated order, and the defers close the producer, the
// pool and the authenticator. listening, if not nil, receives the HTTP
// address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	engine, err := risk.New(cfg.Risk)
	if err != nil {
		return err
	}
	log = log.With("service", cfg.Service)
	reg := platform.NewRegistry()
	// The authenticator first: a JWKS that cannot be read stops the
	// start before any connection is opened.
	authn, err := platform.NewAuthenticator(ctx, cfg.Config, log, reg)
	if err != nil {
		return err
	}
	defer platform.Close(log, "authenticator", func() error { return authn.Close(context.WithoutCancel(ctx)) })

	db, err := platform.OpenPool(ctx, cfg.Config)
	if err != nil {
		return err
	}
	defer db.Close()
	if cfg.MigrateOnStart {
		if err := platform.Migrate(ctx, db, cfg.Service); err != nil {
			return err
		}
	}

	producer, err := platform.NewProducer(cfg.Config)
	if err != nil {
		return err
	}
	defer platform.Close(log, "kafka producer", producer.Close)

	ob := outbox.New(db)
	relay, err := platform.NewRelay(cfg.Config, db, ob, producer, log, reg)
	if err != nil {
		return err
	}

	store := postgres.NewStore(db, ob)
	svc := analysis.NewService(store, engine, cfg.Topics, analysis.NewMetrics(reg))

	requests := consumer.Config{Broker: cfg.Kafka, Group: cfg.Group, Topics: []string{cfg.Topics.Requested},
		// A fetched batch of up to BatchMax records is decided in one
		// transaction.
		Handler: consume.NewHandler(svc, log), MaxBatch: cfg.BatchMax, Policy: consumer.BlockingRetries, Logger: log, Metrics: consumer.NewMetrics(reg)}

	ready := platform.NewReadiness(cfg.Service, db, producer, log, reg)
	router := platform.NewRouter(cfg.Config, log, reg, ready, authn)
	auth.Mount(router, log, opsRoutes(ob, db, log))

	log.InfoContext(ctx, "antifraud starting", "http_addr", cfg.HTTPAddr, "group", cfg.Group,
		"topic", cfg.Topics.Requested, "batch_max", cfg.BatchMax, "rules", engine.RuleNames(), "risk", cfg.Risk.String())
	return platform.Serve(ctx, cfg.Config, log, listening, platform.Parts{
		Router:    router,
		Readiness: ready,
		Relay:     relay,
		Tasks:     []platform.Task{func(ctx context.Context) error { return consumer.Run(ctx, requests) }},
	})
}

// opsRoutes are the operator routes (scope operacoes): the shared outbox
// ones and antifraud's decision; ob and db may be nil (a test's router).
func opsRoutes(ob *outbox.Outbox, db *pg.DB, log *slog.Logger) []auth.Route {
	var store opsweb.Store
	if db != nil {
		store = postgres.NewStore(db, ob)
	}
	return append(opsapi.Routes(ob, log), opsweb.Routes(store, log)...)
}
