package platform_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// probe runs b's readiness probe until the test ends.
func probe(tb testing.TB, b *service) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.ready.Probe(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
}

// probes is the value of readiness_probes_total, all results.
func probes(tb testing.TB, b *service) float64 {
	tb.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "readiness_probes_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// A burst of concurrent /readyz calls opens no broker connection and
// runs no more probes than one a second: /readyz answers from the one
// probe's last result. A dependency that fails turns /readyz 503 within
// about a probe interval, and 200 again once it is back.
func TestReadyzAnswersFromOneProbePerSecond(t *testing.T) {
	t.Parallel()
	dsn, dbProxy := netfault.PostgresURL(t, pgtest.NewDSN(t, migrations.ForService("transfers")...))
	kafkaProxy := netfault.NewProxy(t, kafkatest.Brokers(t)[0])
	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	b := mustOpenService(t, platform.Config{
		Service: "transfers", DatabaseURL: dsn, DBMaxConns: 4, MigrateOnStart: true,
		Kafka: broker.Config{Brokers: []string{kafkaProxy.Addr()}, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, kafkaProxy.Addr()) // every broker through the proxy
		}},
		Auth: authtest.New(t).Config(),
	}, slog.New(slog.DiscardHandler))
	probe(t, b)
	srv := httptest.NewServer(b.router)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	readyz := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/readyz", nil)
		res, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	poll.True(t, 10*time.Second, "/readyz 200", func() bool { return readyz() == http.StatusOK })

	const workers, each = 50, 40
	dials0, probes0, start := dials.Load(), probes(t, b), time.Now()
	var wg sync.WaitGroup
	var notOK atomic.Int64
	for range workers {
		wg.Go(func() {
			for range each {
				if readyz() != http.StatusOK {
					notOK.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	ran := probes(t, b) - probes0
	t.Logf("%d /readyz calls in %v: %d broker dials, %.0f probes", workers*each, elapsed, dials.Load()-dials0, ran)
	if n := notOK.Load(); n > 0 {
		t.Errorf("%d of %d /readyz calls were not 200", n, workers*each)
	}
	// kafka-go's transport lends a connection to one request at a time:
	// a probe that overlaps its background metadata refresh makes it open
	// a second, kept for the next. Never one per call.
	if d := dials.Load() - dials0; d > 2 {
		t.Errorf("%d /readyz calls dialled a broker %d times, want at most the transport's own 2", workers*each, d)
	}
	if limit := elapsed.Seconds()/platform.ReadinessInterval.Seconds() + 1; ran > limit {
		t.Errorf("%.0f probes in %v, want at most %.0f (one per %v)", ran, elapsed, limit, platform.ReadinessInterval)
	}

	for _, tc := range []struct {
		check string
		proxy *netfault.Proxy
	}{{"database", dbProxy}, {"kafka", kafkaProxy}} {
		t.Run(tc.check, func(t *testing.T) {
			cut := time.Now()
			tc.proxy.Cut()
			poll.True(t, 2*platform.ReadinessInterval+time.Second, "/readyz 503 after the cut", func() bool {
				return readyz() == http.StatusServiceUnavailable
			})
			down := time.Since(cut)
			restored := time.Now()
			tc.proxy.Restore()
			poll.True(t, 2*platform.ReadinessInterval+time.Second, "/readyz 200 after the restore", func() bool {
				return readyz() == http.StatusOK
			})
			t.Logf("%s: 503 %v after the cut, 200 %v after the restore", tc.check, down.Round(time.Millisecond), time.Since(restored).Round(time.Millisecond))
		})
	}
}
