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
	"github.com/paysuite/payments/pkg/platform"
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
	// BatchMax is the most records of one partition decided in one
	// database transaction; 1 decides each record alone.
	BatchMax int `env:"ANTIFRAUD_BATCH_MAX" help:"records of one partition decided per transaction, 1..1000; 1 decides one per transaction"`
}

// DefaultBatchMax is how many records of one partition are decided in one
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
	if err := envconfig.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Run runs the service until ctx is cancelled: it opens the database
// (applying migrations unless disabled), serves /healthz, /readyz and
// /metrics on cfg.HTTPAddr, relays the outbox, and consumes the requested
// topic. listening, if not nil, receives the HTTP address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	cfg.Service = Service
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	engine, err := risk.New(cfg.Risk)
	if err != nil {
		return err
	}
	base, err := platform.Open(ctx, cfg.Config, log)
	if err != nil {
		return err
	}
	store := postgres.NewStore(base.DB, base.Outbox)
	svc := analysis.NewService(store, engine, cfg.Topics, analysis.NewMetrics(base.Registry))
	auth.Mount(base.Router, base.Log, opsRoutes(base, base.Log))
	handler := consume.NewHandler(svc, base.Log)
	requests := base.Consumer(cfg.Group, []string{cfg.Topics.Requested}, handler, consumer.BlockingRetries)
	if cfg.BatchMax < 1 {
		cfg.BatchMax = DefaultBatchMax
	}
	if cfg.BatchMax > 1 {
		// A fetched batch is decided in one transaction; on any error the
		// loop decides its records one by one with handler.
		requests.Batch = consume.NewBatchHandler(svc, base.Log)
		requests.MaxBatch = cfg.BatchMax
	}

	base.Log.InfoContext(ctx, "antifraud starting", "http_addr", cfg.HTTPAddr, "group", cfg.Group,
		"topic", cfg.Topics.Requested, "batch_max", cfg.BatchMax, "rules", engine.RuleNames(), "risk", cfg.Risk.String())
	return base.Run(ctx, listening, func(ctx context.Context) error { return consumer.Run(ctx, requests) })
}

// opsRoutes are the operator routes (scope operacoes): the shared outbox
// ones and antifraud's decision; base may be nil (a test's router).
func opsRoutes(base *platform.Base, log *slog.Logger) []auth.Route {
	if base == nil {
		return append(opsapi.Routes(nil, log), opsweb.Routes(nil, log)...)
	}
	return append(opsapi.Routes(base.Outbox, log), opsweb.Routes(base.DB, log)...)
}
