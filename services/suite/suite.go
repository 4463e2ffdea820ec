// Package suite runs the four services in one process (the embedded
// "make run" and "make demo"), each with its own database on one
// PostgreSQL server and its own HTTP port, and drives the scripted demo
// flow over HTTP, against those services or against any running suite.
package suite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
)

// Default ports of CONTRACTS.md section 0.
const (
	TransfersAddr     = ":8080"
	LedgerAddr        = ":8081"
	AntifraudAddr     = ":8082"
	NotificationsAddr = ":8083"
	ConsoleAddr       = console.DefaultHTTPAddr
)

// Options configure the embedded suite.
type Options struct {
	// DatabaseURL names a PostgreSQL server (any database on it); each
	// service gets its own database "<DatabasePrefix><service>" there,
	// created when missing.
	DatabaseURL string
	// DatabasePrefix begins the services' database names; empty is
	// "payments_". Tests that run suites side by side on one server give
	// each its own.
	DatabasePrefix string
	// Brokers are the Kafka brokers; empty starts franz-go's kfake, an
	// in-process fake Kafka, in this process.
	Brokers []string
	// Getenv supplies every other setting of the services (HTTP_ADDR is
	// replaced by <SERVICE>_HTTP_ADDR or the default port).
	Getenv func(string) string
	// Log receives the services' logs; Out receives the suite's own lines.
	Log *slog.Logger
	Out io.Writer
}

// Endpoints are the base URLs of the running services.
type Endpoints struct {
	Transfers, Ledger, Antifraud, Notifications string
	// Console is the operator console, started once the services are
	// ready (it reads them over HTTP like any operator).
	Console string
}

// Run starts the suite and blocks until ctx is cancelled or a service
// fails. ready, if not nil, is called once every service answers /readyz.
// It shows its plan in order: the Kafka brokers (an in-process fake when
// none are given), the topics, a database per service, each service's
// configuration read as its binary reads it, then the services under one
// supervisor, each building its own pool, producer, relay, consumers and
// router and stopping in platform.Serve's order, and the console once they
// answer.
func Run(ctx context.Context, opts Options, ready func(Endpoints)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(opts.Brokers) == 0 {
		brokers, stop, err := startFakeKafka()
		if err != nil {
			return err
		}
		defer stop()
		opts.Brokers = brokers
		fmt.Fprintf(opts.Out, "Kafka:      franz-go kfake at %s (an in-process FAKE Kafka for the demo, not Apache Kafka; set KAFKA_BROKERS for a real broker)\n",
			strings.Join(opts.Brokers, ","))
	} else {
		fmt.Fprintf(opts.Out, "Kafka:      %s\n", strings.Join(opts.Brokers, ","))
	}
	if err := createTopics(ctx, opts); err != nil {
		return err
	}
	prefix := cmp.Or(opts.DatabasePrefix, "payments_")
	dsns, err := createDatabases(ctx, opts.DatabaseURL, prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "PostgreSQL: %s (databases %stransfers, %[2]sledger, %[2]santifraud, %[2]snotifications)\n",
		envconfig.RedactDSN(opts.DatabaseURL), prefix)
	cfgs, err := readConfigs(ctx, opts, dsns)
	if err != nil {
		return err
	}
	return supervise(ctx, cancel, opts, cfgs, ready)
}

// createTopics creates the suite's topics, with the suite's own credential
// (KAFKA_SASL_*); each service reads its own (<SERVICE>_KAFKA_SASL_*, then
// KAFKA_SASL_*).
func createTopics(ctx context.Context, opts Options) error {
	sec, err := broker.SecurityFromEnv(opts.Getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	kcfg := broker.Config{Brokers: opts.Brokers, Security: sec}
	tctx, tcancel := context.WithTimeout(ctx, time.Minute)
	defer tcancel()
	if _, err := broker.CreateTopics(tctx, kcfg, broker.SuiteTopics(events.DefaultTopics, 1)); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	return nil
}

// services are the suite's services, in the order they start.
var services = []string{"transfers", "ledger", "antifraud", "notifications"}

// createDatabases gives each service its database "<prefix><service>" on
// the server of serverURL, created when missing, and returns their URLs by
// service.
func createDatabases(ctx context.Context, serverURL, prefix string) (map[string]string, error) {
	dsns := map[string]string{}
	for _, s := range services {
		dsn, err := ensureDatabase(ctx, serverURL, prefix+s)
		if err != nil {
			return nil, err
		}
		dsns[s] = dsn
	}
	return dsns, nil
}

// configs are the configurations of the suite's services and console.
type configs struct {
	transfers     transfers.Config
	ledger        ledger.Config
	antifraud     antifraud.Config
	notifications notifications.Config
	console       console.Config
}

// readConfigs reads each service's configuration as its binary does, from
// opts.Getenv with <SERVICE>_<NAME> before <NAME>, the database of dsns,
// the suite's brokers and the service's default port; it logs each
// service's effective configuration, secrets masked, as its own binary
// logs it at start.
func readConfigs(ctx context.Context, opts Options, dsns map[string]string) (configs, error) {
	env := func(service, defaultAddr string) func(string) string {
		prefix := strings.ToUpper(service) + "_"
		return func(name string) string {
			switch name {
			case "DATABASE_URL":
				return dsns[service]
			case "KAFKA_BROKERS":
				return strings.Join(opts.Brokers, ",")
			case "HTTP_ADDR":
				if v := opts.Getenv(prefix + "HTTP_ADDR"); v != "" {
					return v
				}
				return defaultAddr
			}
			if v := opts.Getenv(prefix + name); v != "" {
				return v
			}
			return opts.Getenv(name)
		}
	}
	var c configs
	var err error
	// The transfers service reads the ledger's records (an operator's
	// apply of a held result) from the ledger of this process, at the
	// address it is told to bind, unless TRANSFERS_LEDGER_URL says
	// otherwise.
	transfersEnv := env("transfers", TransfersAddr)
	ledgerURL := listenURL(env("ledger", LedgerAddr)("HTTP_ADDR"))
	if c.transfers, err = transfers.ConfigFromEnv(func(name string) string {
		if name == "TRANSFERS_LEDGER_URL" {
			return firstNonEmpty(transfersEnv(name), ledgerURL)
		}
		return transfersEnv(name)
	}); err != nil {
		return c, fmt.Errorf("transfers: %w", err)
	}
	if c.ledger, err = ledger.ConfigFromEnv(env("ledger", LedgerAddr)); err != nil {
		return c, fmt.Errorf("ledger: %w", err)
	}
	if c.antifraud, err = antifraud.ConfigFromEnv(env("antifraud", AntifraudAddr)); err != nil {
		return c, fmt.Errorf("antifraud: %w", err)
	}
	if c.notifications, err = notifications.ConfigFromEnv(env("notifications", NotificationsAddr)); err != nil {
		return c, fmt.Errorf("notifications: %w", err)
	}
	for _, s := range []struct {
		name string
		cfg  any
	}{{"transfers", c.transfers}, {"ledger", c.ledger}, {"antifraud", c.antifraud}, {"notifications", c.notifications}} {
		opts.Log.InfoContext(ctx, "configuration", "service", s.name, "config", envconfig.LogValue(s.cfg))
	}
	c.console, err = console.ConfigFromEnv(func(name string) string {
		switch name {
		case "CONSOLE_HTTP_ADDR":
			return firstNonEmpty(opts.Getenv(name), ConsoleAddr)
		case "DEV_INSECURE_HTTP":
			// The development switch: the suite's services serve plain
			// HTTP in this process, wherever their addresses are bound,
			// and the console reads them so. This binary is not in the
			// production image.
			return firstNonEmpty(opts.Getenv(name), "true")
		}
		return opts.Getenv(name)
	})
	if err != nil {
		return c, fmt.Errorf("console: %w", err)
	}
	return c, nil
}

// supervise runs the four services side by side, and the console once they
// answer /readyz, until ctx ends or one of them stops: then cancel stops
// the others, each in platform.Serve's order, and supervise returns every
// error, not only the first.
func supervise(ctx context.Context, cancel context.CancelFunc, opts Options, c configs, ready func(Endpoints)) error {
	var mu sync.Mutex
	addrs := map[string]string{}
	listening := func(name string) func(net.Addr) {
		return func(a net.Addr) {
			mu.Lock()
			defer mu.Unlock()
			addrs[name] = baseURL(a)
		}
	}
	// Any service stopping, with or without an error, stops the suite
	// (errgroup.WithContext would only on an error).
	var (
		g    errgroup.Group
		emu  sync.Mutex
		errs []error
	)
	fail := func(err error) {
		emu.Lock()
		defer emu.Unlock()
		errs = append(errs, err)
	}
	start := func(name string, run func() error) {
		g.Go(func() error {
			if err := run(); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
			cancel()
			return nil
		})
	}
	start("transfers", func() error { return transfers.Run(ctx, c.transfers, opts.Log, listening("transfers")) })
	start("ledger", func() error { return ledger.Run(ctx, c.ledger, opts.Log, listening("ledger")) })
	start("antifraud", func() error { return antifraud.Run(ctx, c.antifraud, opts.Log, listening("antifraud")) })
	start("notifications", func() error {
		return notifications.Run(ctx, c.notifications, opts.Log, listening("notifications"))
	})
	g.Go(func() error {
		ep, err := waitReady(ctx, &mu, addrs)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
				cancel()
			}
			return nil
		}
		// The console starts once the services answer: it reads them.
		ccfg := c.console
		ccfg.TransfersURL, ccfg.LedgerURL, ccfg.AntifraudURL, ccfg.NotificationsURL = ep.Transfers, ep.Ledger, ep.Antifraud, ep.Notifications
		bound := make(chan string, 1)
		start("console", func() error {
			return console.Run(ctx, ccfg, opts.Log, func(a net.Addr) { bound <- baseURL(a) })
		})
		select {
		case ep.Console = <-bound:
		case <-ctx.Done():
			return nil
		}
		if ready != nil {
			ready(ep)
		}
		return nil
	})
	_ = g.Wait() // the goroutines report through fail
	return errors.Join(errs...)
}

// waitReady polls each service's /readyz until all answer 200.
func waitReady(ctx context.Context, mu *sync.Mutex, addrs map[string]string) (Endpoints, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		ep := Endpoints{Transfers: addrs["transfers"], Ledger: addrs["ledger"], Antifraud: addrs["antifraud"], Notifications: addrs["notifications"]}
		mu.Unlock()
		ok := ep.Transfers != "" && ep.Ledger != "" && ep.Antifraud != "" && ep.Notifications != ""
		for _, u := range []string{ep.Transfers, ep.Ledger, ep.Antifraud, ep.Notifications} {
			if !ok {
				break
			}
			ok = get200(ctx, client, u+"/readyz")
		}
		if ok {
			return ep, nil
		}
		if time.Now().After(deadline) {
			return ep, errors.New("services not ready within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return ep, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get200(ctx context.Context, c *http.Client, u string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// listenURL is the base URL of a service told to listen at addr
// (":8081" is http://localhost:8081); a port of 0 is chosen at start, so
// the URL names no listener.
func listenURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func baseURL(a net.Addr) string { return listenURL(a.String()) }

// ensureDatabase creates database name on the server of serverURL when
// missing and returns its URL.
func ensureDatabase(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL")
	}
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL at %s: %w", envconfig.RedactDSN(serverURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	u.Path = "/" + name
	return u.String(), nil
}

// redact hides the password of a database URL.
func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
