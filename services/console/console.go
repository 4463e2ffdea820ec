// Package console is the operator console (issue 17): a web page to find
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
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console/internal/ui"
)

// Service is the console's name in logs.
const Service = "console"

// DefaultHTTPAddr is the console's port.
const DefaultHTTPAddr = ":8084"

// Config is the console's configuration.
type Config struct {
	HTTPAddr string
	// TransfersURL, LedgerURL, AntifraudURL and NotificationsURL are the
	// services' base URLs.
	TransfersURL, LedgerURL, AntifraudURL, NotificationsURL string
	// Auth verifies the tokens operators sign in with.
	Auth auth.Config
	// SessionTTL bounds a sign-in; ActionsPerMinute limits each session's
	// actions.
	SessionTTL       time.Duration
	ActionsPerMinute int
	// SampleInterval is how often the services' /metrics are sampled for
	// the Backlogs charts.
	SampleInterval time.Duration
	// OIDC, when enabled, adds sign-in by OpenID Connect beside the
	// pasted token.
	OIDC OIDCConfig
}

// ConfigFromEnv reads the configuration. Variables, with their defaults:
//
//	CONSOLE_HTTP_ADDR           :8084                  where the console listens
//	CONSOLE_TRANSFERS_URL       http://localhost:8080  the transfers service
//	CONSOLE_LEDGER_URL          http://localhost:8081  the ledger
//	CONSOLE_ANTIFRAUD_URL       http://localhost:8082  antifraud
//	CONSOLE_NOTIFICATIONS_URL   http://localhost:8083  notifications
//	CONSOLE_SESSION_TTL         8h                     longest sign-in
//	CONSOLE_ACTIONS_PER_MINUTE  10                     actions per session and minute
//	CONSOLE_SAMPLE_INTERVAL     10s                    how often the services' /metrics are sampled (15 min kept)
//	AUTH_JWKS_URL | AUTH_JWKS_FILE, AUTH_ISSUER (required), AUTH_AUDIENCE
//	                                                   token verification (platform.AuthFromEnv)
//
// Sign-in by OpenID Connect, all four or none (then only the pasted token):
//
//	CONSOLE_OIDC_ISSUER         (unset)                the provider's issuer URL (discovery)
//	CONSOLE_OIDC_CLIENT_ID      (unset)                the console's client id at the provider
//	CONSOLE_OIDC_CLIENT_SECRET  (unset)                its secret (never logged), or _FILE: a file holding it
//	CONSOLE_OIDC_REDIRECT_URL   (unset)                https://<console>/oidc/callback, as registered
//	CONSOLE_OIDC_SCOPES         openid                 scopes asked for (space or comma separated; openid always)
//	CONSOLE_OIDC_NAME           the issuer's host      the provider's name on the sign-in page
//
// The access token the provider issues must pass the same check as a
// pasted one (AUTH_*, scope operacoes).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := platform.NewEnv(getenv)
	cfg := Config{
		HTTPAddr:         env.String("CONSOLE_HTTP_ADDR", DefaultHTTPAddr),
		TransfersURL:     env.String("CONSOLE_TRANSFERS_URL", "http://localhost:8080"),
		LedgerURL:        env.String("CONSOLE_LEDGER_URL", "http://localhost:8081"),
		AntifraudURL:     env.String("CONSOLE_ANTIFRAUD_URL", "http://localhost:8082"),
		NotificationsURL: env.String("CONSOLE_NOTIFICATIONS_URL", "http://localhost:8083"),
		Auth:             platform.AuthFromEnv(env),
		SessionTTL:       env.Duration("CONSOLE_SESSION_TTL", 8*time.Hour),
		ActionsPerMinute: env.Int("CONSOLE_ACTIONS_PER_MINUTE", 10),
		SampleInterval:   env.Duration("CONSOLE_SAMPLE_INTERVAL", 10*time.Second),
		OIDC:             oidcFromEnv(env),
	}
	if cfg.SampleInterval < 100*time.Millisecond {
		env.Check(errors.New("CONSOLE_SAMPLE_INTERVAL must be at least 100ms"))
	}
	return cfg, env.Err()
}

// Run serves the console until ctx is cancelled. listening, if not nil,
// receives the address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	log = log.With("service", Service)
	verifier, err := auth.NewVerifier(ctx, cfg.Auth, log)
	if err != nil {
		return err
	}
	defer func() { _ = verifier.Close(context.WithoutCancel(ctx)) }()
	srv, err := ui.New(ui.Config{
		Transfers:        ui.Upstream{Name: "transfers", URL: cfg.TransfersURL},
		Ledger:           ui.Upstream{Name: "ledger", URL: cfg.LedgerURL},
		Antifraud:        ui.Upstream{Name: "antifraud", URL: cfg.AntifraudURL},
		Notifications:    ui.Upstream{Name: "notifications", URL: cfg.NotificationsURL},
		SessionTTL:       cfg.SessionTTL,
		ActionsPerMinute: cfg.ActionsPerMinute,
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
	sampled := make(chan struct{})
	go func() { defer close(sampled); srv.Sample(ctx) }()
	err = httpapi.Serve(ctx, cfg.HTTPAddr, r, log, listening)
	cancel()
	<-sampled
	return err
}
