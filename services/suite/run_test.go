package suite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/services/suite"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// The all-in-one suite on a real PostgreSQL and a real Kafka: every
// service and the console answer once ready is called, and a cancel stops
// them all, Run returning without an error and every listener closed. It
// uses the suite's own names (databases payments_<service>, the default
// topics and groups), as `make run` does.
func TestRunServesThenStopsEveryService(t *testing.T) {
	ep, cancel, done := startSuite(t, authtest.New(t).Env())
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	status := func(url string) (int, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_ = res.Body.Close()
		return res.StatusCode, nil
	}
	probes := map[string]string{
		"transfers": ep.Transfers + "/readyz", "ledger": ep.Ledger + "/readyz", "antifraud": ep.Antifraud + "/readyz",
		"notifications": ep.Notifications + "/readyz", "console": ep.Console + "/healthz",
	}
	for name, url := range probes {
		if code, err := status(url); err != nil || code != http.StatusOK {
			t.Errorf("%s: GET %s = %d, %v; want 200", name, url, code, err)
		}
	}

	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		t.Logf("stopped %v after the cancel (SHUTDOWN_DRAIN=1s)", time.Since(stopped).Round(time.Millisecond))
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run after the cancel = %v, want no error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of the cancel")
	}
	for name, url := range probes {
		poll.True(t, 5*time.Second, name+" stopped listening", func() bool {
			_, err := status(url)
			return err != nil
		})
	}
}

// startSuite runs the embedded suite on the test PostgreSQL and Kafka with
// env (every listener on a free port, a 1 s drain) and returns its
// endpoints once ready, the cancel that stops it and Run's result.
func startSuite(t *testing.T, env map[string]string) (suite.Endpoints, context.CancelFunc, <-chan error) {
	t.Helper()
	for _, name := range []string{"TRANSFERS_HTTP_ADDR", "LEDGER_HTTP_ADDR", "ANTIFRAUD_HTTP_ADDR", "NOTIFICATIONS_HTTP_ADDR", "CONSOLE_HTTP_ADDR"} {
		env[name] = "127.0.0.1:0"
	}
	env["SHUTDOWN_DRAIN"] = "1s"
	ctx, cancel := context.WithCancel(context.Background())
	readyc, done := make(chan suite.Endpoints, 1), make(chan error, 1)
	start := time.Now()
	go func() {
		done <- suite.Run(ctx, suite.Options{
			DatabaseURL: pgtest.ServerURL(t),
			// Its own databases: payments-dev's demo test runs the suite
			// on the same server at the same time.
			DatabasePrefix: fmt.Sprintf("suite%d_", time.Now().UnixNano()),
			Brokers:        kafkatest.Brokers(t),
			Getenv:         func(k string) string { return env[k] },
			Log:            slog.New(slog.DiscardHandler),
			Out:            io.Discard,
		}, func(ep suite.Endpoints) { readyc <- ep })
	}()
	select {
	case ep := <-readyc:
		t.Logf("ready %v after Run", time.Since(start).Round(time.Millisecond))
		return ep, cancel, done
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before the suite was ready: %v", err)
	case <-time.After(3 * time.Minute):
		cancel()
		t.Fatal("the suite was not ready within 3 minutes")
	}
	return suite.Endpoints{}, cancel, done
}
