package secure_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/apiclient"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// service is one of the four services running on the secured broker as its
// own principal, with its own database.
type service struct {
	name string
	url  string
	db   *pgxpool.Pool
	logs *logtest.Buffer
}

// suite is the four services of one test.
type suite struct {
	transfers, ledger, antifraud, notifications *service
}

// startSuite runs the four services, each configured through its
// environment exactly as a deployment does (KAFKA_SASL_* with its own user,
// the password as a file, KAFKA_TLS_CA_FILE), on the suite's default
// topics and groups, and waits until each answers /readyz. They stop when
// the test ends.
func startSuite(tb testing.TB) *suite {
	tb.Helper()
	type build func(getenv func(string) string) (func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error, error)
	specs := []struct {
		name, user string
		extra      map[string]string
		build      build
	}{
		{transfers.Service, userTransfers, nil, func(getenv func(string) string) (func(context.Context, *slog.Logger, func(net.Addr)) error, error) {
			cfg, err := transfers.ConfigFromEnv(getenv)
			return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
				return transfers.Run(ctx, cfg, log, l)
			}, err
		}},
		{ledger.Service, userLedger, nil, func(getenv func(string) string) (func(context.Context, *slog.Logger, func(net.Addr)) error, error) {
			cfg, err := ledger.ConfigFromEnv(getenv)
			return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
				return ledger.Run(ctx, cfg, log, l)
			}, err
		}},
		{antifraud.Service, userAntifraud, map[string]string{"ANTIFRAUD_VELOCITY_MAX_COUNT": "0", "ANTIFRAUD_VELOCITY_MAX_CENTS": "0"},
			func(getenv func(string) string) (func(context.Context, *slog.Logger, func(net.Addr)) error, error) {
				cfg, err := antifraud.ConfigFromEnv(getenv)
				return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
					return antifraud.Run(ctx, cfg, log, l)
				}, err
			}},
		{notifications.Service, userNotifications, map[string]string{"NOTIFY_CHANNEL": notifications.ChannelLog},
			func(getenv func(string) string) (func(context.Context, *slog.Logger, func(net.Addr)) error, error) {
				cfg, err := notifications.ConfigFromEnv(getenv)
				return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
					return notifications.Run(ctx, cfg, log, l)
				}, err
			}},
	}
	// Every HTTP call of the suite carries one client's token with every
	// scope: accounts are opened as that client, so its transfers may
	// debit them.
	iss := authtest.New(tb)
	bearer = iss.Bearer(tb, "secure-client", authtest.AllScopes...)
	transferKey = iss.TransferKey()
	minter = iss.Bearer(tb, "secure-tesouraria", authtest.DepositScopes...)
	out := make([]*service, len(specs))
	for i, sp := range specs {
		dsn := pgtest.NewDSN(tb, migrations.ForService(sp.name)...)
		env := sb.Env(sp.user)
		env["HTTP_ADDR"] = "127.0.0.1:0"
		env["DATABASE_URL"] = dsn
		env["DATABASE_MAX_CONNS"] = "5"
		maps.Copy(env, iss.Env())
		for k, v := range sp.extra {
			env[k] = v
		}
		run, err := sp.build(func(k string) string { return env[k] })
		if err != nil {
			tb.Fatalf("%s configuration: %v", sp.name, err)
		}
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			tb.Fatalf("pool on the %s database: %v", sp.name, err)
		}
		tb.Cleanup(pool.Close)
		svc := &service{name: sp.name, db: pool, logs: &logtest.Buffer{}}
		log, err := platform.NewLogger(svc.logs, "text", "info")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { // after the service has stopped: cleanups run last first
			if tb.Failed() {
				log := svc.logs.String()
				log = log[max(0, len(log)-16<<10):] // the last 16 KiB
				tb.Logf("--- %s log:\n%s", sp.name, log)
			}
		})
		addr, _ := background.Serve(tb, sp.name, func(ctx context.Context, listening func(net.Addr)) error {
			return run(ctx, log, listening)
		})
		svc.url = "http://" + addr.String()
		out[i] = svc
	}
	for _, svc := range out {
		poll.Until(tb, time.Minute, svc.name+" ready", func() (bool, string) {
			status, body, err := call(context.Background(), http.MethodGet, svc.url+"/readyz", "", nil)
			return err == nil && status == http.StatusOK, fmt.Sprintf("%d %s %v", status, body, err)
		})
	}
	return &suite{transfers: out[0], ledger: out[1], antifraud: out[2], notifications: out[3]}
}

// call is the one place the tests speak HTTP to the services: method on
// url, with key as Idempotency-Key when not empty and body as JSON when not
// nil. It returns the status and the body.
// bearer is the Authorization of every call but deposits, minter the one
// of deposits (contas:depositar only); startSuite sets both.
var bearer, minter string

// transferKey is the transfers service's transfer authorization key, the
// one the ledger trusts; startSuite sets it.
var transferKey transfersig.Signer

func call(ctx context.Context, method, url, key string, body any) (int, []byte, error) {
	return callAs(ctx, bearer, method, url, key, body)
}

func callAs(ctx context.Context, authorization, method, url, key string, body any) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := apiclient.Client{Authorization: authorization}.Do(ctx, method, url, key, body)
	return r.Status, r.Body, err
}

// must is call that fails the test unless the status is want, decoding the
// body into out when not nil.
func must(tb testing.TB, method, url, key string, body, out any, want int) {
	tb.Helper()
	mustAs(tb, bearer, method, url, key, body, out, want)
}

// mustAs is must with another Authorization.
func mustAs(tb testing.TB, authorization, method, url, key string, body, out any, want int) {
	tb.Helper()
	status, b, err := callAs(context.Background(), authorization, method, url, key, body)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	if status != want {
		tb.Fatalf("%s %s: status %d, want %d: %s", method, url, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: decode %s: %v", method, url, b, err)
		}
	}
}
