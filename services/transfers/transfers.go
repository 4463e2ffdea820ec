// Package transfers is the transfers service: it accepts transfer requests
// over HTTP (POST /transferencias, idempotent by Idempotency-Key), stores
// each with its TransferenciaSolicitada event in one transaction (the outbox
// relay publishes it), and projects the settlement results read from Kafka
// onto the transfer's status (consumer group transferencias-projecao). It
// also takes a hold's capture and cancellation and a settled transfer's
// refunds (POST /transferencias/{id}/estornos), each written with its
// event, and projects the ledger's answers to them.
//
// Run starts it; the transfers binary and the all-in-one binary call it.
package transfers

import (
	"context"
	_ "embed" // the OpenAPI document
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/transfers/internal/admission"
	"github.com/paysuite/payments/services/transfers/internal/consume"
	"github.com/paysuite/payments/services/transfers/internal/ledgerhttp"
	"github.com/paysuite/payments/services/transfers/internal/opsweb"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
)

// Service is the service's name: its logs and its migration set
// (migrations/transfers).
const Service = "transfers"

// DefaultHTTPAddr is the service's port (CONTRACTS.md section 0).
const DefaultHTTPAddr = ":8080"

// OpenAPI is the OpenAPI 3.1 document of the HTTP API, served at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// heldGaugeInterval is how often transfers_results_held is read from the
// table.
const heldGaugeInterval = 10 * time.Second

// heldReapplyInterval is how often the re-apply task looks for held
// results whose transfer has become visible.
const heldReapplyInterval = time.Second

// DefaultHeldReapplyWindow is how long a held result is re-applied
// automatically before it is left to an operator.
const DefaultHeldReapplyWindow = 5 * time.Minute

// DefaultInboxRetention is how long processed-event rows are kept by
// default: longer than a record can come back (the topics' 7-day
// retention, then a DLT record replayed up to 7 days later), so that a
// redelivery still finds its row.
const DefaultInboxRetention = 14 * 24 * time.Hour

// projectionBatchMax is the most results of one fetch the projection
// applies in one statement.
const projectionBatchMax = 100

// inFlightPerConn times DATABASE_MAX_CONNS is the most POSTs admitted and
// not answered yet (admission.Config.MaxInFlight): enough to keep every
// connection busy while the next requests are read and authenticated, few
// enough that a surge waits at the door, answered 503 at once, rather than
// in the pool's queue.
const inFlightPerConn = 8

// projectionConns is the size of the projection's own pool: one for its
// batch of results, one for the re-apply of held results.
const projectionConns = 2

// relayConns is the size of the relay's own pool: a connection for each
// worker's claims and marks (OUTBOX_WORKERS), and one each for its
// notifier, cleanup, gauges and broker probe.
func relayConns(c outbox.RelayConfig) int32 {
	workers := c.Workers
	if workers <= 0 {
		workers = outbox.DefaultRelayConfig().Workers
	}
	return int32(workers + 4) //nolint:gosec // a handful
}

// Config is the transfers service's configuration.
type Config struct {
	platform.Config
	// Topics are the Kafka topics; events.DefaultTopics in production.
	Topics events.Topics
	// ProjectionGroup is the consumer group of the status projection;
	// transferencias-projecao in production.
	ProjectionGroup string
	// ClaimTimeout bounds how long a request stalled inside its transaction
	// keeps its Idempotency-Key in flight.
	ClaimTimeout time.Duration `env:"IDEMPOTENCY_CLAIM_TIMEOUT" help:"longest a stalled request keeps its Idempotency-Key in flight (409); at least 1s"`
	// AdmissionMaxAge is the oldest an outbox event the relay can send
	// (not held behind a DEAD one) may be before new transfers are shed
	// (503 overloaded); 0 turns admission control off.
	AdmissionMaxAge time.Duration `env:"ADMISSION_MAX_OUTBOX_AGE" help:"oldest an outbox event the relay can send may be before new POST /transferencias are shed (503 overloaded); 0s: never shed"`
	// AdmissionMaxPending, if positive, also sheds past this many outbox
	// events the relay can send.
	AdmissionMaxPending int64 `env:"ADMISSION_MAX_OUTBOX_PENDING" help:"also shed past this many outbox events the relay can send; 0: no count bound"`
	// AdmissionMaxLatency, if positive, also sheds while more than half
	// of the transfers settled lately took longer than this from POST to
	// result.
	AdmissionMaxLatency time.Duration `env:"ADMISSION_MAX_LATENCY" help:"also shed while more than half of the transfers settled lately took longer than this from POST to result (their median); 0s: no latency bound"`
	// AdmissionRefresh is how often admission control reads the backlog.
	AdmissionRefresh time.Duration `env:"ADMISSION_REFRESH" help:"how often admission control reads the outbox backlog"`
	// AuthorizationKeyFile is the private Ed25519 JWK that signs each
	// transfer's authorization (pkg/transfersig); the ledger holds its
	// public key. Only this service is given it.
	AuthorizationKeyFile string `env:"TRANSFERS_AUTHORIZATION_KEY_FILE,required" help:"the private key (JWK, payments auth transfer-keygen) that signs each transfer for the ledger; only this service holds it"`
	// HeldReapplyWindow is how long a held result is re-applied
	// automatically once its transfer becomes visible; older ones wait for
	// an operator, and alert.
	HeldReapplyWindow time.Duration `env:"HELD_REAPPLY_WINDOW" help:"how long a held settlement result is re-applied automatically once the transfer of its request becomes visible; past it, an operator applies or discards it (alert TransfersResultsHeld)"`
	// LedgerURL is the ledger's base URL: an operator's apply of a held
	// result reads the ledger's record of the transfer there, with the
	// operator's own token (scope operacoes). https://, or http:// to the
	// loopback or with DEV_INSECURE_HTTP (auth.CheckURL): the token must
	// not cross a network in clear.
	LedgerURL string `env:"TRANSFERS_LEDGER_URL" help:"the ledger's base URL: applying a held result reads the ledger's record of the transfer there, with the operator's own token; https://, http:// only to the loopback or with DEV_INSECURE_HTTP"`
	// InboxRetention is how long the projection's processed-event rows
	// are kept.
	InboxRetention time.Duration `env:"INBOX_RETENTION" help:"how long the transfers projection's processed-event rows are kept"`
}

// DefaultLedgerURL is the ledger's base URL by default: its port on this
// machine (CONTRACTS.md section 0), as make run and make demo serve it.
const DefaultLedgerURL = "http://localhost:8081"

// DefaultConfig is the configuration before the environment is read.
func DefaultConfig() Config {
	return Config{
		Config:              platform.DefaultConfig(Service, DefaultHTTPAddr),
		Topics:              events.DefaultTopics,
		ProjectionGroup:     consume.Group,
		ClaimTimeout:        postgres.DefaultClaimTimeout,
		AdmissionMaxAge:     admission.DefaultMaxAge,
		AdmissionMaxLatency: admission.DefaultMaxLatency,
		AdmissionRefresh:    admission.DefaultRefresh,
		HeldReapplyWindow:   DefaultHeldReapplyWindow,
		LedgerURL:           DefaultLedgerURL,
		InboxRetention:      DefaultInboxRetention,
	}
}

// Variables are the variables ConfigFromEnv reads, with their defaults and
// descriptions (the binary's --help).
func Variables() []envconfig.Var { return envconfig.Vars(DefaultConfig()) }

// ConfigFromEnv reads the configuration declared by Config's tags (see
// Variables, or "transfers --help"). Every problem is reported at once.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	errs := []error{envconfig.Parse(getenv, &cfg, platform.ParseOptions()...), cfg.Complete()}
	if cfg.ClaimTimeout < time.Second {
		errs = append(errs, errors.New("IDEMPOTENCY_CLAIM_TIMEOUT must be at least 1s"))
	}
	if cfg.HeldReapplyWindow <= 0 {
		errs = append(errs, errors.New("HELD_REAPPLY_WINDOW must be positive"))
	}
	if cfg.InboxRetention <= 0 {
		errs = append(errs, errors.New("INBOX_RETENTION must be positive"))
	}
	errs = append(errs, auth.CheckURL("TRANSFERS_LEDGER_URL", cfg.LedgerURL, cfg.Auth.InsecureHTTP))
	if cfg.AdmissionMaxAge < 0 || cfg.AdmissionMaxPending < 0 || cfg.AdmissionMaxLatency < 0 || cfg.AdmissionRefresh <= 0 {
		errs = append(errs, errors.New("ADMISSION_MAX_OUTBOX_AGE, ADMISSION_MAX_OUTBOX_PENDING and ADMISSION_MAX_LATENCY must not be negative, ADMISSION_REFRESH must be positive"))
	}
	return cfg, envconfig.Join(errs...)
}

// Run runs the service with cfg, as ConfigFromEnv gives it (Run checks
// nothing again), and log (platform.Main reads them and starts tracing)
// until ctx is cancelled. It builds, in order, the metrics
// registry and the authenticator, the pool and its migrations, the Kafka
// producer, the outbox and its relay, the service, its consumers and its
// router; platform.Serve runs them and stops them in its stated order, and
// the defers close the producer, the pool and the authenticator.
// listening, if not nil, gets the HTTP address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	log = log.With("service", cfg.Service)
	reg := platform.NewRegistry()
	// The keys first: a JWKS or a signing key that cannot be read stops
	// the start before any connection is opened.
	authn, err := platform.NewAuthenticator(ctx, cfg.Config, log, reg)
	if err != nil {
		return err
	}
	defer platform.Close(log, "authenticator", func() error { return authn.Close(context.WithoutCancel(ctx)) })
	signer, err := transfersig.ReadSigner(cfg.AuthorizationKeyFile)
	if err != nil {
		return fmt.Errorf("TRANSFERS_AUTHORIZATION_KEY_FILE: %w", err)
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

	// The relay claims and marks on a pool of its own: under a surge every
	// connection of the service's pool is a POST's, and a relay behind
	// them publishes a fraction of what it takes otherwise, which
	// admission control then answers by shedding harder.
	relayDB, err := pg.Open(ctx, cfg.DatabaseURL, relayConns(cfg.Relay))
	if err != nil {
		return err
	}
	defer relayDB.Close()
	ob := outbox.New(relayDB)
	relay, err := platform.NewRelay(cfg.Config, relayDB, ob, producer, log, reg)
	if err != nil {
		return err
	}

	// Admission control reads the backlog the relay can send from the
	// database (every instance the same figure), not from this process's
	// relay, on a connection of its own: through the pool, its read would
	// queue behind the very requests it is there to shed (under a surge
	// every connection of the pool is a POST's, and the read waits seconds
	// for one while the door admits everything offered).
	admitDB, err := pg.Open(ctx, cfg.DatabaseURL, 1)
	if err != nil {
		return err
	}
	defer admitDB.Close()
	admit := admission.New(admission.Config{MaxAge: cfg.AdmissionMaxAge, MaxPending: cfg.AdmissionMaxPending,
		MaxInFlight: inFlightPerConn * cfg.DBMaxConns, MaxLatency: cfg.AdmissionMaxLatency, Refresh: cfg.AdmissionRefresh, PublishDelay: publishDelay(cfg.Config)},
		admission.NewBacklog(admitDB), time.Now, admission.NewMetrics(reg))
	store := postgres.NewStore(db, ob, cfg.ProjectionGroup, reg, cfg.ClaimTimeout)
	svc := transfer.NewService(store, cfg.Topics, signer)
	log.InfoContext(ctx, "transfer authorization key", "authorization_kid", signer.KeyID())
	// The listing's cursors are authenticated with a key derived from the
	// signing key: the same on every instance, and nothing to configure.
	cursorKey, err := signer.DeriveKey(historyCursorPurpose)
	if err != nil {
		return err
	}
	history, err := transfer.NewHistory(store, cursorKey)
	if err != nil {
		return err
	}

	// The projection writes through the store, on a pool of its own, and
	// tells admission control what it settles: under a surge every
	// connection of the service's pool is a POST's, and a projection
	// waiting behind them settles a trickle, which admission control reads
	// as the flow falling behind and answers by shutting the door further.
	projectionDB, err := pg.Open(ctx, cfg.DatabaseURL, projectionConns)
	if err != nil {
		return err
	}
	defer projectionDB.Close()
	projection := consume.NewProjection(store.On(projectionDB), admit, cfg.Topics, log)
	pcfg := consumer.Config{Broker: cfg.Kafka, Group: cfg.ProjectionGroup, Topics: projection.Topics(),
		Policy: consumer.BlockingRetries, Logger: log, Metrics: consumer.NewMetrics(reg),
		// The results of one topic fetched together are applied in
		// one statement.
		Handler: projection.Handle, MaxBatch: projectionBatchMax}

	ready := platform.NewReadiness(cfg.Service, db, producer, log, reg)
	router := platform.NewRouter(cfg.Config, log, reg, ready, authn)
	mount(router, svc, history, admit, web.NewIdempotencyMetrics(reg), opsRoutes(ob, store, ledgerhttp.New(cfg.LedgerURL), log), log)

	return platform.Serve(ctx, cfg.Config, log, listening, platform.Parts{
		Router:    router,
		Readiness: ready,
		Relay:     relay,
		Tasks: []platform.Task{
			admit.Run,
			func(ctx context.Context) error { return consumer.Run(ctx, pcfg) },
			func(ctx context.Context) error {
				return store.CleanupInboxLoop(ctx, cfg.InboxRetention, time.Minute, log)
			},
			func(ctx context.Context) error {
				return store.HeldGaugesLoop(ctx, cfg.HeldReapplyWindow, heldGaugeInterval, log)
			},
			func(ctx context.Context) error {
				return projection.ReapplyLoop(ctx, cfg.HeldReapplyWindow, heldReapplyInterval)
			},
		},
	})
}

// publishDelay is how late the outbox table learns that the relay cfg
// chooses published an event: the logical relay marks its rows PUBLISHED
// at each settle, the polling relay as soon as the broker acknowledged
// them.
func publishDelay(cfg platform.Config) time.Duration {
	if cfg.RelayMode != platform.RelayLogical {
		return 0
	}
	return cfg.Logical.SettleInterval
}

// historyCursorPurpose names the key, derived from the transfer signing
// key, that authenticates the cursors of GET /transferencias.
const historyCursorPurpose = "paysuite transfers listing cursor v1"

// mount adds the service's routes to r, a router from httpapi.NewRouter:
// the API, its listing read from history, its POST behind admission
// control admit (nil: never shed) and counted on idem (nil: not counted),
// then the operator routes ops.
func mount(r chi.Router, svc *transfer.Service, history *transfer.History, admit web.Admission, idem *web.IdempotencyMetrics,
	ops []auth.Route, log *slog.Logger) {
	h := web.New(svc, log, OpenAPI).WithIdempotencyMetrics(idem).WithHistory(history)
	if admit != nil {
		h.WithAdmission(admit)
	}
	h.Mount(r)
	auth.Mount(r, log, ops)
}

// opsRoutes are the operator routes (scope operacoes): the shared outbox
// ones and the transfers' own, which apply held results against ledger's
// records; ob, store and ledger may be nil (a test's router).
func opsRoutes(ob *outbox.Outbox, store *postgres.Store, ledger *ledgerhttp.Client, log *slog.Logger) []auth.Route {
	var ops opsweb.Store
	if store != nil {
		ops = store
	}
	var l opsweb.Ledger
	if ledger != nil {
		l = ledger
	}
	return append(opsapi.Routes(ob, log), opsweb.Routes(ops, l, log)...)
}
