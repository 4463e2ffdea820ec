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
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/kafka"
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
	BatchMax int
}

// DefaultBatchMax is how many records of one partition are decided in one
// transaction unless ANTIFRAUD_BATCH_MAX says otherwise.
const DefaultBatchMax = 50

// ConfigFromEnv reads the configuration. Besides the variables every
// service reads (platform.ConfigFromEnv: HTTP_ADDR, default ":8082";
// DATABASE_URL, required; DATABASE_MAX_CONNS; KAFKA_BROKERS; OUTBOX_*;
// MIGRATE_ON_START), it reads:
//
//	ANTIFRAUD_BASE_SCORE         score when no rule fires            10
//	ANTIFRAUD_BLOCK_THRESHOLD    block from this score on (1..100)   80
//	ANTIFRAUD_HIGH_AMOUNT_CENTS  high_amount fires from this amount  10000000 (R$ 100.000,00; 0 disables)
//	ANTIFRAUD_HIGH_AMOUNT_SCORE  score of high_amount                95
//	ANTIFRAUD_VELOCITY_WINDOW    sliding window of velocity rules    1h
//	ANTIFRAUD_VELOCITY_MAX_COUNT approved transfers per source
//	                             account and window, beyond which
//	                             velocity_count fires                20 (0 disables)
//	ANTIFRAUD_VELOCITY_MAX_CENTS approved cents per source account
//	                             and window, beyond which
//	                             velocity_amount fires               20000000 (R$ 200.000,00; 0 disables)
//	ANTIFRAUD_VELOCITY_SCORE     score of the velocity rules         90
//	ANTIFRAUD_BLOCKLIST          comma-separated accounts blocked as
//	                             source or destination               empty
//	ANTIFRAUD_BLOCKLIST_SCORE    score of the blocklist rules        100
//	ANTIFRAUD_BATCH_MAX          records of one partition decided in
//	                             one transaction (1..1000)           50
//
// Every problem is reported at once, in one error.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := platform.NewEnv(getenv)
	def := risk.DefaultConfig()
	cfg := Config{
		Config: platform.ConfigFromEnv(env, Service, DefaultHTTPAddr),
		Topics: events.DefaultTopics,
		Group:  DefaultGroup,
		Risk: risk.Config{
			BaseScore:        env.Int("ANTIFRAUD_BASE_SCORE", def.BaseScore),
			BlockThreshold:   env.Int("ANTIFRAUD_BLOCK_THRESHOLD", def.BlockThreshold),
			HighAmountCents:  env.Int64("ANTIFRAUD_HIGH_AMOUNT_CENTS", def.HighAmountCents),
			HighAmountScore:  env.Int("ANTIFRAUD_HIGH_AMOUNT_SCORE", def.HighAmountScore),
			VelocityWindow:   env.Duration("ANTIFRAUD_VELOCITY_WINDOW", def.VelocityWindow),
			VelocityMaxCount: env.Int64("ANTIFRAUD_VELOCITY_MAX_COUNT", def.VelocityMaxCount),
			VelocityMaxCents: env.Int64("ANTIFRAUD_VELOCITY_MAX_CENTS", def.VelocityMaxCents),
			VelocityScore:    env.Int("ANTIFRAUD_VELOCITY_SCORE", def.VelocityScore),
			Blocklist:        risk.ParseList(env.String("ANTIFRAUD_BLOCKLIST", "")),
			BlocklistScore:   env.Int("ANTIFRAUD_BLOCKLIST_SCORE", def.BlocklistScore),
		},
		BatchMax: env.Int("ANTIFRAUD_BATCH_MAX", DefaultBatchMax),
	}
	if cfg.BatchMax < 1 || cfg.BatchMax > 1000 {
		env.Check(fmt.Errorf("ANTIFRAUD_BATCH_MAX: %d is not within 1..1000", cfg.BatchMax))
	}
	if _, err := risk.New(cfg.Risk); err != nil {
		env.Check(err)
	}
	if err := env.Err(); err != nil {
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
	handler := kafka.NewHandler(svc, base.Log)
	requests := base.Consumer(cfg.Group, []string{cfg.Topics.Requested}, handler, consumer.BlockingRetries)
	if cfg.BatchMax < 1 {
		cfg.BatchMax = DefaultBatchMax
	}
	if cfg.BatchMax > 1 {
		// A fetched batch is decided in one transaction; on any error the
		// loop decides its records one by one with handler.
		requests.Batch = kafka.NewBatchHandler(svc, base.Log)
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
