// Package console is the operator console: a web page to find
// a transfer, follow it through the four services, see the backlogs and
// requeue a DEAD event. It is server-rendered (html/template, assets
// embedded), holds no database and reads the services only through their
// HTTP APIs (the /ops endpoints, scope operacoes) with the signed-in
// operator's own token.
//
// Run starts it; the console binary and the all-in-one binary call it.
package console

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console/internal/ui"
)

// Service is the console's name in logs.
const Service = "console"

// DefaultHTTPAddr is the console's port.
const DefaultHTTPAddr = ":8084"

// Config is the console's configuration, declared with pkg/envconfig's
// tags ("console --help" lists it).
type Config struct {
	HTTPAddr string `env:"CONSOLE_HTTP_ADDR" help:"where the console listens"`
	// TransfersURL, LedgerURL, AntifraudURL and NotificationsURL are the
	// services' base URLs: https://, or http:// to the loopback, or
	// anywhere with DEV_INSECURE_HTTP (Auth.InsecureHTTP): the console
	// sends the signed-in operator's token to each.
	TransfersURL     string `env:"CONSOLE_TRANSFERS_URL" envDefault:"http://localhost:8080" help:"the transfers service"`
	LedgerURL        string `env:"CONSOLE_LEDGER_URL" envDefault:"http://localhost:8081" help:"the ledger"`
	AntifraudURL     string `env:"CONSOLE_ANTIFRAUD_URL" envDefault:"http://localhost:8082" help:"antifraud"`
	NotificationsURL string `env:"CONSOLE_NOTIFICATIONS_URL" envDefault:"http://localhost:8083" help:"notifications"`
	// Auth verifies the tokens operators sign in with.
	Auth auth.Config
	// SessionTTL bounds a sign-in; ActionsPerMinute limits each session's
	// actions.
	SessionTTL       time.Duration `env:"CONSOLE_SESSION_TTL" envDefault:"8h" help:"longest sign-in"`
	ActionsPerMinute int           `env:"CONSOLE_ACTIONS_PER_MINUTE" envDefault:"10" help:"actions per session and minute"`
	// MaxSessions caps the signed-in sessions; a sign-in past it ends the
	// oldest.
	MaxSessions int `env:"CONSOLE_MAX_SESSIONS" envDefault:"1000" help:"most signed-in sessions kept; past it a sign-in ends the oldest"`
	// SampleInterval is how often the services' /metrics are sampled for
	// the Backlogs charts.
	SampleInterval time.Duration `env:"CONSOLE_SAMPLE_INTERVAL" envDefault:"10s" help:"how often the services' /metrics are sampled (15 min kept); at least 100ms"`
	// OIDC, when enabled, adds sign-in by OpenID Connect beside the
	// pasted token.
	OIDC OIDCConfig
}

// DefaultConfig is the configuration before the environment is read: the
// defaults that are Go values (the envDefault tags give the others).
func DefaultConfig() Config { return Config{HTTPAddr: DefaultHTTPAddr, Auth: auth.DefaultConfig()} }

// Variables are the variables ConfigFromEnv reads, with their defaults and
// descriptions (the binary's --help).
func Variables() []envconfig.Var { return envconfig.Vars(DefaultConfig()) }

// ConfigFromEnv reads the configuration declared by Config's tags. Every
// problem is reported at once. The access token an OpenID provider issues
// must pass the same check as a pasted one (AUTH_*, scope operacoes).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	errs := []error{envconfig.Parse(getenv, &cfg), cfg.Auth.Validate(), cfg.checkUpstreams()}
	errs = append(errs, cfg.OIDC.complete()...)
	if cfg.SampleInterval < 100*time.Millisecond {
		errs = append(errs, errors.New("CONSOLE_SAMPLE_INTERVAL must be at least 100ms"))
	}
	if cfg.MaxSessions < 1 {
		errs = append(errs, errors.New("CONSOLE_MAX_SESSIONS must be at least 1"))
	}
	return cfg, envconfig.Join(errs...)
}

// checkUpstreams refuses an upstream URL over which the operator's token
// would cross a network in clear (auth.CheckURL).
func (c Config) checkUpstreams() error {
	var errs []error
	for _, u := range []struct{ name, url string }{
		{"CONSOLE_TRANSFERS_URL", c.TransfersURL}, {"CONSOLE_LEDGER_URL", c.LedgerURL},
		{"CONSOLE_ANTIFRAUD_URL", c.AntifraudURL}, {"CONSOLE_NOTIFICATIONS_URL", c.NotificationsURL},
	} {
		errs = append(errs, auth.CheckURL(u.name, u.url, c.Auth.InsecureHTTP))
	}
	return errors.Join(errs...)
}

// Run serves the console with cfg and log (platform.Main reads them and
// starts tracing) until ctx is cancelled. It builds, in order, the token
// verifier, the console's server and the router; it serves until ctx ends
// with the metrics sampler and the session sweeper beside it, then stops
// them and closes the verifier. The console has no database and no Kafka.
// listening, if not nil, receives the address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	log = log.With("service", Service)
	if err := cfg.checkUpstreams(); err != nil {
		return err
	}
	if cfg.Auth.InsecureHTTP {
		log.WarnContext(ctx, "DEV_INSECURE_HTTP: operator tokens may go to the services over plain http; development only")
	}
	verifier, err := auth.NewVerifier(ctx, cfg.Auth, log)
	if err != nil {
		return err
	}
	defer platform.Close(log, "token verifier", func() error { return verifier.Close(context.WithoutCancel(ctx)) })
	srv, err := ui.New(ui.Config{
		Transfers:        ui.Upstream{Name: "transfers", URL: cfg.TransfersURL},
		Ledger:           ui.Upstream{Name: "ledger", URL: cfg.LedgerURL},
		Antifraud:        ui.Upstream{Name: "antifraud", URL: cfg.AntifraudURL},
		Notifications:    ui.Upstream{Name: "notifications", URL: cfg.NotificationsURL},
		SessionTTL:       cfg.SessionTTL,
		ActionsPerMinute: cfg.ActionsPerMinute,
		MaxSessions:      cfg.MaxSessions,
		SampleInterval:   cfg.SampleInterval,
		OIDC: ui.OIDC{Issuer: cfg.OIDC.Issuer, ClientID: cfg.OIDC.ClientID, ClientSecret: cfg.OIDC.ClientSecret,
			RedirectURL: cfg.OIDC.RedirectURL, Scopes: cfg.OIDC.Scopes, Name: cfg.OIDC.Name},
	}, verifier, log)
	if err != nil {
		return err
	}
	r := httpapi.NewRouter(log, nil, nil, nil)
	srv.Mount(r)
	if cfg.OIDC.Enabled() {
		log.InfoContext(ctx, "console OpenID Connect sign-in", "oidc_issuer", cfg.OIDC.Issuer)
		srv.DiscoverOIDC(ctx)
	}
	log.InfoContext(ctx, "console starting", "http_addr", cfg.HTTPAddr, "transfers", cfg.TransfersURL,
		"ledger", cfg.LedgerURL, "antifraud", cfg.AntifraudURL, "notifications", cfg.NotificationsURL)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var side sync.WaitGroup
	side.Go(func() { srv.Sample(ctx) })
	side.Go(func() { srv.Sweep(ctx) })
	err = httpapi.Serve(ctx, cfg.HTTPAddr, r, log, listening)
	cancel()
	side.Wait()
	return err
}
