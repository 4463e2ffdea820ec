// Package ledger is the ledger service: it settles analysed transfers from
// Kafka into double-entry postings on PostgreSQL (the seed's
// LiquidacaoService and LiquidacaoListener), publishes the result through
// its outbox, watches its dead-letter topic, and serves the accounts API.
package ledger

import (
	"context"
	_ "embed" // the OpenAPI document
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/consume"
	domain "github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/opsweb"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/services/ledger/internal/web"
)

// Service is the service name: logs, and the migration set.
const Service = "ledger"

// OpenAPI is the OpenAPI 3.1 document of the accounts API, served at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Default consumer groups (CONTRACTS.md section 3): the settlement of
// analisada, the captures and cancellations of holds (one group reading
// both command topics), the refunds, and the monitor of the ledger's
// DLTs.
const (
	DefaultGroup           = "ledger"
	DefaultCommandsGroup   = "ledger-comandos"
	DefaultRefundsGroup    = "ledger-estornos"
	DefaultDLTMonitorGroup = "ledger-dlt-monitor"
)

// Defaults of the expiry sweep: how often it looks for reservations past
// their expiry, and how many it releases per transaction.
const (
	DefaultExpiryInterval = time.Second
	DefaultExpiryBatch    = 100
)

// DefaultBatchMax is how many records of one fetch are settled in one
// transaction at most.
const DefaultBatchMax = 50

// DefaultMaxDepositCents is the ceiling of one deposit: 10^9 cents
// (R$ 10.000.000,00).
const DefaultMaxDepositCents = 1_000_000_000

// DefaultMaxDepositCentsPerDay is the most one client may deposit in one
// currency in one UTC day: 10^11 cents (R$ 1.000.000.000,00), a hundred
// deposits at the ceiling of one. It bounds what a stolen minting
// credential can create before an operator notices.
const DefaultMaxDepositCentsPerDay = 100_000_000_000

// MaxDepositCentsPerDayLimit is the largest daily ceiling accepted: a
// day's total plus one deposit stays within 64 bits.
const MaxDepositCentsPerDayLimit = 1_000_000_000_000_000_000

// Config is the ledger's configuration.
type Config struct {
	platform.Config
	// Topics are the suite's topic names; the ledger reads Analysed,
	// CaptureRequested, CancelRequested and RefundRequested, and writes
	// Settled, Rejected, Reserved, Cancelled, RefundSettled and
	// RefundRejected.
	Topics events.Topics
	// Group, CommandsGroup, RefundsGroup and DLTMonitorGroup are the
	// consumer groups of the settlement consumer, of the captures and
	// cancellations, of the refunds, and of the DLT monitor.
	Group           string
	CommandsGroup   string
	RefundsGroup    string
	DLTMonitorGroup string
	// ExpiryInterval is how often the expiry sweep looks for reservations
	// past their expiry; ExpiryBatch how many it releases per transaction.
	ExpiryInterval time.Duration `env:"LEDGER_EXPIRY_INTERVAL" help:"how often the ledger releases the holds past their expiraEm, 10ms to 1h; a hold is released at most about this long after it expires"`
	ExpiryBatch    int           `env:"LEDGER_EXPIRY_BATCH" help:"holds the expiry sweep releases per transaction, 1..1000"`
	// BatchMax is the most records of one fetch settled in one database
	// transaction; 1 settles each in its own.
	BatchMax int `env:"LEDGER_BATCH_MAX" help:"records of one fetch settled per transaction, 1..1000; 1 settles one per transaction"`
	// Ownership is whether only the source account's titular may debit it
	// (default enforced).
	Ownership domain.Ownership `env:"LEDGER_OWNERSHIP" envDefault:"on" help:"on: a transfer debits an account only when its autorizacao verifies and its clienteId is the account's titular; off: neither check, for producers that predate both"`
	// AuthorizationJWKSFile holds the public keys of the transfers
	// service's authorizations (one, or two during a rotation); required
	// with ownership on.
	AuthorizationJWKSFile string `env:"LEDGER_AUTHORIZATION_JWKS_FILE" help:"the public JWKS of the transfers service's authorization keys (payments auth transfer-keygen); one key, or two during a rotation; required unless LEDGER_OWNERSHIP=off"`
	// MaxDepositCents is the ceiling of one deposit: a deposit above it is
	// refused (422 deposit-over-ceiling) and writes nothing.
	MaxDepositCents int64 `env:"LEDGER_MAX_DEPOSIT_CENTS" help:"largest amount of one deposit (POST /contas/{id}/depositos), 1..10^15 cents; above it: 422 deposit-over-ceiling"`
	// MaxDepositCentsPerDay is the most one client may deposit in one
	// currency in one UTC day, counted in the deposit's transaction: a
	// deposit that would pass it is refused (422
	// deposit-over-daily-ceiling) and writes nothing.
	MaxDepositCentsPerDay int64 `env:"LEDGER_MAX_DEPOSIT_CENTS_PER_DAY" help:"most one client may deposit in one currency per UTC day, 1..10^18 cents; past it: 422 deposit-over-daily-ceiling"`
}

// DefaultConfig is the configuration before the environment is read.
func DefaultConfig() Config {
	return Config{
		Config:                platform.DefaultConfig(Service, ":8081"),
		Topics:                events.DefaultTopics,
		Group:                 DefaultGroup,
		CommandsGroup:         DefaultCommandsGroup,
		RefundsGroup:          DefaultRefundsGroup,
		DLTMonitorGroup:       DefaultDLTMonitorGroup,
		ExpiryInterval:        DefaultExpiryInterval,
		ExpiryBatch:           DefaultExpiryBatch,
		BatchMax:              DefaultBatchMax,
		MaxDepositCents:       DefaultMaxDepositCents,
		MaxDepositCentsPerDay: DefaultMaxDepositCentsPerDay,
	}
}

// Variables are the variables ConfigFromEnv reads, with their defaults and
// descriptions (the binary's --help).
func Variables() []envconfig.Var { return envconfig.Vars(DefaultConfig()) }

// parseOwnership reads LEDGER_OWNERSHIP.
func parseOwnership(v string) (domain.Ownership, error) {
	switch v {
	case "on":
		return domain.OwnershipEnforced, nil
	case "off":
		return domain.OwnershipOff, nil
	}
	return 0, fmt.Errorf("%q is neither \"on\" nor \"off\"", v)
}

// ConfigFromEnv reads the configuration declared by Config's tags (see
// Variables, or "ledger --help"). Every problem is reported at once.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	opts := append(platform.ParseOptions(), envconfig.WithParser(parseOwnership))
	errs := []error{envconfig.Parse(getenv, &cfg, opts...), cfg.Complete()}
	if cfg.BatchMax < 1 || cfg.BatchMax > 1000 {
		errs = append(errs, fmt.Errorf("LEDGER_BATCH_MAX: %d is not within 1..1000", cfg.BatchMax))
	}
	if cfg.MaxDepositCents < 1 || cfg.MaxDepositCents > domain.MaxAmountCents {
		errs = append(errs, fmt.Errorf("LEDGER_MAX_DEPOSIT_CENTS: %d is not within 1..%d", cfg.MaxDepositCents, int64(domain.MaxAmountCents)))
	}
	if cfg.Ownership == domain.OwnershipEnforced && cfg.AuthorizationJWKSFile == "" {
		errs = append(errs, errors.New("LEDGER_AUTHORIZATION_JWKS_FILE is required: the ledger debits only on an authorization it can verify"))
	}
	if cfg.ExpiryInterval < 10*time.Millisecond || cfg.ExpiryInterval > time.Hour {
		errs = append(errs, fmt.Errorf("LEDGER_EXPIRY_INTERVAL: %s is not within 10ms..1h", cfg.ExpiryInterval))
	}
	if cfg.ExpiryBatch < 1 || cfg.ExpiryBatch > 1000 {
		errs = append(errs, fmt.Errorf("LEDGER_EXPIRY_BATCH: %d is not within 1..1000", cfg.ExpiryBatch))
	}
	if cfg.MaxDepositCentsPerDay < 1 || cfg.MaxDepositCentsPerDay > MaxDepositCentsPerDayLimit {
		errs = append(errs, fmt.Errorf("LEDGER_MAX_DEPOSIT_CENTS_PER_DAY: %d is not within 1..%d", cfg.MaxDepositCentsPerDay, int64(MaxDepositCentsPerDayLimit)))
	}
	return cfg, envconfig.Join(errs...)
}

// policy retries a failed settlement (not a business rejection) in place
// until it settles; only this package's tests run another (export_test.go).
var policy consumer.Policy = consumer.BlockingRetries

// Run runs the ledger with cfg, as ConfigFromEnv gives it (Run checks
// nothing again), and log (platform.Main reads them and starts tracing)
// until ctx is cancelled. It builds, in order, the metrics
// registry, the authenticator and the authorization keys, the pool and its
// migrations, the Kafka producer, the outbox and its relay, the ledger's service, the settlement
// consumer, the consumer of the hold commands, the DLT monitor and the
// expiry sweep, and the router with the accounts API;
// platform.Serve runs them and stops them in its stated order, and the
// defers close the producer, the pool and the authenticator. listening, if
// not nil, receives the HTTP address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	return run(ctx, cfg, log, listening, policy)
}

// run is Run with the policy of failed settlements given.
func run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr), policy consumer.Policy) error {
	log = log.With("service", cfg.Service)
	reg := platform.NewRegistry()
	// The authenticator first: a JWKS that cannot be read stops the
	// start before any connection is opened.
	authn, err := platform.NewAuthenticator(ctx, cfg.Config, log, reg)
	if err != nil {
		return err
	}
	defer platform.Close(log, "authenticator", func() error { return authn.Close(context.WithoutCancel(ctx)) })
	var keys *transfersig.Verifier
	if cfg.Ownership == domain.OwnershipEnforced {
		if keys, err = transfersig.ReadVerifier(cfg.AuthorizationJWKSFile); err != nil {
			return fmt.Errorf("LEDGER_AUTHORIZATION_JWKS_FILE: %w", err)
		}
	}

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

	store := postgres.New(db, ob)
	svc := domain.NewService(store, domain.Rules{Ownership: cfg.Ownership, Keys: keys, Topics: cfg.Topics,
		MaxDepositCents: cfg.MaxDepositCents, MaxDepositCentsPerDay: cfg.MaxDepositCentsPerDay}, time.Now)

	metrics := consume.NewMetrics(reg)
	consumerMetrics := consumer.NewMetrics(reg)
	settlement := consume.NewSettlement(svc, log, metrics)
	settle := consumer.Config{Broker: cfg.Kafka, Group: cfg.Group, Topics: []string{cfg.Topics.Analysed},
		Handler: settlement.Handle, MaxBatch: cfg.BatchMax, Policy: policy, Logger: log, Metrics: consumerMetrics}
	commands := consume.NewCommands(svc, cfg.Topics, log, metrics)
	closing := consumer.Config{Broker: cfg.Kafka, Group: cfg.CommandsGroup, Topics: CommandTopics(cfg.Topics),
		Handler: commands.Handle, MaxBatch: cfg.BatchMax, Policy: policy, Logger: log, Metrics: consumerMetrics}
	refunds := consume.NewRefunds(svc, log, metrics)
	refunding := consumer.Config{Broker: cfg.Kafka, Group: cfg.RefundsGroup, Topics: []string{cfg.Topics.RefundRequested},
		Handler: refunds.Handle, MaxBatch: cfg.BatchMax, Policy: policy, Logger: log, Metrics: consumerMetrics}
	monitor := consume.NewDLTMonitor(log, metrics)
	dlts := DLTs(cfg.Topics)
	dlt := consumer.Config{Broker: cfg.Kafka, Group: cfg.DLTMonitorGroup, Topics: dlts,
		Handler: monitor.Handle, Policy: policy, Logger: log, Metrics: consumerMetrics}

	ready := platform.NewReadiness(cfg.Service, db, producer, log, reg)
	router := platform.NewRouter(cfg.Config, log, reg, ready, authn)
	mount(router, svc, opsRoutes(ob, db, cfg.Kafka, dlts, log), log)

	log.InfoContext(ctx, "ledger starting", "http_addr", cfg.HTTPAddr, "topic", cfg.Topics.Analysed,
		"group", cfg.Group, "batch_max", cfg.BatchMax, "expiry_interval", cfg.ExpiryInterval.String(), "ownership", cfg.Ownership == domain.OwnershipEnforced,
		"authorization_kids", keys.KeyIDs(),
		"max_deposit_cents", cfg.MaxDepositCents, "max_deposit_cents_per_day", cfg.MaxDepositCentsPerDay)
	return platform.Serve(ctx, cfg.Config, log, listening, platform.Parts{
		Router:    router,
		Readiness: ready,
		Relay:     relay,
		Tasks: []platform.Task{
			func(ctx context.Context) error { return consumer.Run(ctx, settle) },
			func(ctx context.Context) error { return consumer.Run(ctx, closing) },
			func(ctx context.Context) error { return consumer.Run(ctx, refunding) },
			func(ctx context.Context) error { return consumer.Run(ctx, dlt) },
			func(ctx context.Context) error {
				svc.RunExpiry(ctx, cfg.ExpiryInterval, cfg.ExpiryBatch, log, metrics.Expired)
				return nil
			},
		},
	})
}

// CommandTopics are the topics of the commands on holds the ledger reads:
// captures and cancellations.
func CommandTopics(t events.Topics) []string { return []string{t.CaptureRequested, t.CancelRequested} }

// DLTs are the dead-letter topics the ledger writes (those of the topics
// it reads), which its DLT monitor reads and its operators replay.
func DLTs(t events.Topics) []string {
	return []string{events.DLT(t.Analysed), events.DLT(t.CaptureRequested), events.DLT(t.CancelRequested),
		events.DLT(t.RefundRequested)}
}

// mount adds the service's routes to r, a router from httpapi.NewRouter:
// the accounts API, the operator routes ops and the OpenAPI document.
func mount(r chi.Router, svc *domain.Service, ops []auth.Route, log *slog.Logger) {
	web.New(svc, log).Routes(r)
	auth.Mount(r, log, ops)
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
}

// opsRoutes are the operator routes (scope operacoes): the shared outbox
// and dead-letter ones (on the DLTs the ledger writes) and the ledger's
// own; ob and db may be nil (a test's router).
func opsRoutes(ob *outbox.Outbox, db *pg.DB, kcfg broker.Config, dlts []string, log *slog.Logger) []auth.Route {
	var store opsweb.Store
	if db != nil {
		store = postgres.New(db, ob)
	}
	return slices.Concat(opsapi.Routes(ob, log), opsapi.DLTRoutes(kcfg, dlts, log), opsweb.Routes(store, log))
}
