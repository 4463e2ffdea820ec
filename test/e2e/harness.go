// Package e2e runs the four services of the suite as they run in production
// and drives them from outside: each service is its own Run call with its
// own database, HTTP port and logger, the services talk only through a real
// Kafka broker, and customers are notified through signed webhooks sent to a
// real HTTP receiver that checks every signature.
//
// [NewSuite] builds and starts the whole suite for one test; each service can
// then be stopped and started again ([Service.Stop], [Service.Start]) with
// the same database, topics and consumer groups, which is how a test
// restarts a service in the middle of a flow. The helpers here wait for
// conditions with deadlines (never bare sleeps) and check the invariants of
// CONTRACTS.md directly in the services' databases.
//
// The tests live in this folder (package e2e_test) and, for the one that
// installs a global tracer provider, in e2e/trace.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
)

// WebhookSecret signs the webhooks of every suite the harness starts.
const WebhookSecret = "e2e-webhook-secret-0123456789abcdef" //nolint:gosec // a test's secret

// EnvLogDir names a folder that, when set, receives every service's full
// log as "<test>.<service>.log" (the test keeps only the tail in memory).
const EnvLogDir = "E2E_LOG_DIR"

// Options tune a suite.
type Options struct {
	// Partitions of every topic; default 4.
	Partitions int
	// Env adds or overrides environment variables read by every service's
	// ConfigFromEnv (e.g. LEDGER_BATCH_MAX).
	Env map[string]string
}

// Suite is the four services of one test, wired only through Kafka.
type Suite struct {
	tb      testing.TB
	Topics  events.Topics
	Brokers []string
	// Groups are the consumer groups, by role.
	Groups Groups
	// Receiver is the customers' webhook endpoint.
	Receiver *Receiver

	Transfers, Ledger, Antifraud, Notifications *Service

	// Issuer signs the clients' tokens; the services fetch its JWKS over
	// HTTP. A and B are two clients with every scope but contas:depositar;
	// requests are A's unless sent through As(B). Minter holds only
	// contas:depositar, and makes Deposit's deposits.
	Issuer *authtest.TestIssuer
	A, B   Client
	Minter Client

	client *http.Client
	bearer string
}

// Client is an API client: its id (the token's sub) and bearer token.
type Client struct {
	Name   string
	Bearer string // "Bearer <token>"; empty sends no Authorization
}

// As returns a view of the suite whose requests carry c's token.
func (s *Suite) As(c Client) *Suite {
	cp := *s
	cp.bearer = c.Bearer
	return &cp
}

// Groups names the consumer groups of one suite (unique per test).
type Groups struct {
	Projection    string // transfers' status projection
	Antifraud     string
	Ledger        string
	LedgerDLT     string
	Notifications string // plus "<group>-retry-<ms>" for its retry topics
}

// Service is one running (or stopped) service: its database stays, so a
// stopped service starts again where it left off.
type Service struct {
	Name string
	// DSN is the service's own database; DB is a pool on it for the test's
	// direct queries.
	DSN string
	DB  *pgxpool.Pool

	tb   testing.TB
	run  func(ctx context.Context, log *slog.Logger, listening func(net.Addr)) error
	logs *logBuffer

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	url    string
	starts int
}

// NewSuite creates the topics, the databases and the webhook receiver,
// starts the four services and waits until each answers /readyz. Everything
// is stopped and dropped when the test ends.
func NewSuite(tb testing.TB, opts Options) *Suite {
	tb.Helper()
	if opts.Partitions <= 0 {
		opts.Partitions = 4
	}
	s := &Suite{
		tb:      tb,
		Brokers: kafkatest.Brokers(tb),
		Topics:  kafkatest.SuiteTopics(tb, opts.Partitions),
		Groups: Groups{
			Projection:    kafkatest.Group(tb, transfers.Service+"-projecao"),
			Antifraud:     kafkatest.Group(tb, antifraud.DefaultGroup),
			Ledger:        kafkatest.Group(tb, ledger.DefaultGroup),
			LedgerDLT:     kafkatest.Group(tb, ledger.DefaultDLTMonitorGroup),
			Notifications: kafkatest.Group(tb, notifications.DefaultGroup),
		},
		Receiver: NewReceiver(tb, []byte(WebhookSecret)),
		client: &http.Client{
			Timeout:   15 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		},
	}
	tb.Cleanup(s.client.CloseIdleConnections)
	s.Issuer = authtest.New(tb)
	s.A = Client{Name: "cliente-a", Bearer: s.Issuer.Bearer(tb, "cliente-a", authtest.AllScopes...)}
	s.B = Client{Name: "cliente-b", Bearer: s.Issuer.Bearer(tb, "cliente-b", authtest.AllScopes...)}
	s.Minter = Client{Name: "tesouraria", Bearer: s.Issuer.Bearer(tb, "tesouraria", authtest.DepositScopes...)}
	s.bearer = s.A.Bearer

	env := func(dsn string, extra map[string]string) func(string) string {
		m := map[string]string{
			"HTTP_ADDR":          "127.0.0.1:0",
			"DATABASE_URL":       dsn,
			"DATABASE_MAX_CONNS": "10",
			"KAFKA_BROKERS":      strings.Join(s.Brokers, ","),
		}
		maps.Copy(m, s.Issuer.Env())
		for k, v := range extra {
			m[k] = v
		}
		for k, v := range opts.Env {
			m[k] = v
		}
		return func(k string) string { return m[k] }
	}
	mustConfig := func(name string, err error) {
		if err != nil {
			tb.Fatalf("e2e: %s configuration: %v", name, err)
		}
	}

	// The transfers service reads the ledger's records (an operator's
	// apply of a held result) through a proxy with a fixed address that
	// forwards to wherever the ledger listens now: a restarted ledger
	// listens on a new port.
	ledgerProxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		if u, err := url.Parse(s.Ledger.URL()); err == nil {
			r.SetURL(u)
		}
	}})
	tb.Cleanup(ledgerProxy.Close)
	s.Transfers = s.newService(transfers.Service, func(dsn string) runFunc {
		cfg, err := transfers.ConfigFromEnv(env(dsn, map[string]string{"TRANSFERS_LEDGER_URL": ledgerProxy.URL}))
		mustConfig(transfers.Service, err)
		cfg.Topics = s.Topics
		cfg.ProjectionGroup = s.Groups.Projection
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return transfers.Run(ctx, cfg, log, l)
		}
	})
	s.Ledger = s.newService(ledger.Service, func(dsn string) runFunc {
		cfg, err := ledger.ConfigFromEnv(env(dsn, nil))
		mustConfig(ledger.Service, err)
		cfg.Topics = s.Topics
		cfg.Group = s.Groups.Ledger
		cfg.DLTMonitorGroup = s.Groups.LedgerDLT
		cfg.CommandsGroup = s.Groups.Ledger + "-comandos"
		cfg.RefundsGroup = s.Groups.Ledger + "-estornos"
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return ledger.Run(ctx, cfg, log, l)
		}
	})
	s.Antifraud = s.newService(antifraud.Service, func(dsn string) runFunc {
		// The velocity rules would block the bulk tests' busy accounts.
		cfg, err := antifraud.ConfigFromEnv(env(dsn, map[string]string{
			"ANTIFRAUD_VELOCITY_MAX_COUNT": "0",
			"ANTIFRAUD_VELOCITY_MAX_CENTS": "0",
		}))
		mustConfig(antifraud.Service, err)
		cfg.Topics = s.Topics
		cfg.Group = s.Groups.Antifraud
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return antifraud.Run(ctx, cfg, log, l)
		}
	})
	s.Notifications = s.newService(notifications.Service, func(dsn string) runFunc {
		cfg, err := notifications.ConfigFromEnv(env(dsn, map[string]string{
			"NOTIFY_CHANNEL":      notifications.ChannelWebhook,
			"WEBHOOK_DEFAULT_URL": s.Receiver.URL() + "/webhooks/paysuite",
			"WEBHOOK_SECRET":      WebhookSecret,
			"WEBHOOK_TIMEOUT":     "5s",
			"WEBHOOK_ALLOW_HTTP":  "true", // the test receiver listens on plain HTTP
		}))
		mustConfig(notifications.Service, err)
		cfg.Topics = s.Topics
		cfg.Group = s.Groups.Notifications
		return func(ctx context.Context, log *slog.Logger, l func(net.Addr)) error {
			return notifications.Run(ctx, cfg, log, l)
		}
	})

	// Start in parallel: each start migrates its database and joins Kafka.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, svc := range s.Services() {
		wg.Go(func() { errs[i] = svc.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("e2e: start suite: %v", err)
	}
	return s
}

type runFunc func(ctx context.Context, log *slog.Logger, listening func(net.Addr)) error

func (s *Suite) newService(name string, build func(dsn string) runFunc) *Service {
	tb := s.tb
	tb.Helper()
	dsn := pgtest.NewDSN(tb, migrations.ForService(name)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		tb.Fatalf("e2e: pool on %s database: %v", name, err)
	}
	tb.Cleanup(pool.Close)
	svc := &Service{Name: name, DSN: dsn, DB: pool, tb: tb, run: build(dsn), logs: newLogBuffer(1 << 20)}
	// Registered after the database's cleanups, so it runs before them.
	tb.Cleanup(func() {
		if svc.Running() {
			svc.Stop()
		}
		if tb.Failed() {
			tb.Logf("--- last log lines of %s:\n%s", name, svc.logs.tail(80))
		}
	})
	return svc
}

// Services returns the four services.
func (s *Suite) Services() []*Service {
	return []*Service{s.Transfers, s.Ledger, s.Antifraud, s.Notifications}
}

// Start runs the service (again) with its configuration, database, topics
// and groups, and returns once it answers /readyz. It fails the test if the
// service does not come up within a minute.
func (svc *Service) Start() {
	svc.tb.Helper()
	if err := svc.start(); err != nil {
		svc.tb.Fatalf("e2e: %v", err)
	}
}

func (svc *Service) start() error {
	svc.mu.Lock()
	if svc.cancel != nil {
		svc.mu.Unlock()
		return fmt.Errorf("start %s: already running", svc.Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	svc.cancel, svc.done = cancel, done
	svc.starts++
	var out io.Writer = svc.logs
	if dir := os.Getenv(EnvLogDir); dir != "" {
		f, err := os.OpenFile(filepath.Join(dir, strings.ReplaceAll(svc.tb.Name(), "/", "_")+"."+svc.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // test log file
		if err == nil {
			svc.tb.Cleanup(func() { _ = f.Close() })
			out = io.MultiWriter(svc.logs, f)
		}
	}
	log, err := platform.NewLogger(out, "text", "info")
	if err != nil {
		svc.mu.Unlock()
		cancel()
		return err
	}
	log = log.With("run", svc.starts)
	svc.mu.Unlock()

	addrc := make(chan net.Addr, 1)
	go func() { done <- svc.run(ctx, log, func(a net.Addr) { addrc <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		svc.forget()
		return fmt.Errorf("start %s: Run returned before listening: %v", svc.Name, err)
	case <-time.After(time.Minute):
		svc.forget()
		return fmt.Errorf("start %s: not listening after 1m", svc.Name)
	}
	url := "http://" + addr.String()
	deadline := time.Now().Add(time.Minute)
	for !get200(url + "/readyz") {
		if time.Now().After(deadline) {
			svc.forget()
			return fmt.Errorf("start %s: /readyz not 200 after 1m", svc.Name)
		}
		select {
		case err := <-done:
			svc.forget()
			return fmt.Errorf("start %s: Run returned before ready: %v", svc.Name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	svc.mu.Lock()
	svc.url = url
	svc.mu.Unlock()
	return nil
}

func (svc *Service) forget() {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.cancel != nil {
		svc.cancel()
	}
	svc.cancel, svc.done, svc.url = nil, nil, ""
}

// Stop cancels the service's Run and waits for it to return, as a SIGTERM
// would; the test fails if Run returns an error or takes over a minute.
func (svc *Service) Stop() {
	svc.tb.Helper()
	svc.mu.Lock()
	cancel, done := svc.cancel, svc.done
	svc.url = ""
	svc.mu.Unlock()
	if cancel == nil {
		svc.tb.Fatalf("e2e: stop %s: not running", svc.Name)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			svc.tb.Errorf("e2e: %s Run returned %v after cancellation, want nil", svc.Name, err)
		}
	case <-time.After(time.Minute):
		svc.tb.Errorf("e2e: %s Run did not return within 1m of cancellation", svc.Name)
	}
	svc.mu.Lock()
	svc.cancel, svc.done = nil, nil
	svc.mu.Unlock()
}

// Running reports whether the service was started and not stopped.
func (svc *Service) Running() bool {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return svc.cancel != nil
}

// URL is the service's base URL, or "" while it is stopped. A restarted
// service listens on a new port.
func (svc *Service) URL() string {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return svc.url
}

// Logs returns the last lines the service logged.
func (svc *Service) Logs(lines int) string { return svc.logs.tail(lines) }

func get200(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logBuffer keeps the last max bytes a service logged, for failure reports.
type logBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over+b.max/4:]...)
	}
	return len(p), nil
}

func (b *logBuffer) tail(lines int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := bytes.TrimRight(b.buf, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			lines--
			if lines == 0 {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
