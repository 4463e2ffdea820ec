package web_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// BenchmarkAuthShareOfPost weighs the authentication middleware against
// the POST /transferencias it guards, one request at a time, in process
// (router.ServeHTTP, no network): ns/op is one POST through the service's
// router and middleware on a real PostgreSQL (a new transfer each, its
// idempotency record and outbox row committed). Then, in the same run,
// the middleware alone in front of an empty handler, with the token cache
// warm and with it off. Reported per request: post-cpu-us (this process's
// CPU, PostgreSQL's own excluded, so the share below is an upper bound),
// mw-cached-ns and mw-uncached-ns (wall), mw-cached-cpu-ns and
// mw-uncached-cpu-ns, and cached/post-% and cached/post-cpu-%, the cached
// middleware's cost as a share of the POST's.
func BenchmarkAuthShareOfPost(b *testing.B) {
	ctx := context.Background()
	pool, store := openStore(b, transfersDSN(b), func(c *pgxpool.Config) { c.MaxConns = 2 })
	logSettings(b, pool)
	iss := authtest.New(b)
	cached := authenticator(b, iss, auth.DefaultTokenCacheSize)
	router := benchRouter(store, cached.Middleware)
	bearer := iss.Bearer(b, "bench", auth.ScopeTransfersCreate)

	post := func(i int) {
		body := fmt.Sprintf(`{"contaOrigem":"CC-%03d","contaDestino":"CC-999","valorEmCentavos":%d,"moeda":"BRL"}`, i%64, 100+i%64)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/transferencias", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		req.Header.Set("Idempotency-Key", uuid.NewString())
		w := httptest.NewRecorder()
		router.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("POST /transferencias: %d %s", w.Code, w.Body)
		}
	}
	for i := range 200 { // warm up: connections, plans, the token cache
		post(i)
	}

	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	for i := range b.N {
		post(i)
	}
	postWall, postCPU := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()

	uncached := authenticator(b, iss, 0)
	cachedWall, cachedCPU := middlewareCost(b, cached, bearer, 200_000)
	uncachedWall, uncachedCPU := middlewareCost(b, uncached, bearer, 5_000)
	n := float64(b.N)
	b.ReportMetric(float64(postCPU.Microseconds())/n, "post-cpu-us")
	b.ReportMetric(cachedWall, "mw-cached-ns")
	b.ReportMetric(cachedCPU, "mw-cached-cpu-ns")
	b.ReportMetric(uncachedWall, "mw-uncached-ns")
	b.ReportMetric(uncachedCPU, "mw-uncached-cpu-ns")
	b.ReportMetric(100*cachedWall/(float64(postWall.Nanoseconds())/n), "cached/post-%")
	b.ReportMetric(100*cachedCPU/(float64(postCPU.Nanoseconds())/n), "cached/post-cpu-%")
}

// authenticator is an authenticator trusting iss with a token cache of
// size entries (0: off) and a rate limit the benchmark never reaches.
func authenticator(b *testing.B, iss *authtest.TestIssuer, size int) *auth.Authenticator {
	b.Helper()
	cfg := iss.Config()
	cfg.TokenCacheSize = size
	a, err := auth.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

// middlewareCost runs n requests bearing bearer through a's middleware in
// front of an empty handler, after a warm-up, and returns the wall and CPU
// nanoseconds per request.
func middlewareCost(b *testing.B, a *auth.Authenticator, bearer string, n int) (wall, cpu float64) {
	b.Helper()
	reached := 0
	h := a.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/transferencias", http.NoBody)
	req.Header.Set("Authorization", bearer)
	w := httptest.NewRecorder()
	for range 100 {
		h.ServeHTTP(w, req)
	}
	cpu0, t0 := cpuTime(), time.Now()
	for range n {
		h.ServeHTTP(w, req)
	}
	elapsed, used := time.Since(t0), cpuTime()-cpu0
	if reached != n+100 {
		b.Fatalf("the middleware refused the token: %d of %d requests reached the handler", reached, n+100)
	}
	return float64(elapsed.Nanoseconds()) / float64(n), float64(used.Nanoseconds()) / float64(n)
}

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
