package auth_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/httpapi"
)

// TestRateLimit: each client has its own bucket of RATE_LIMIT_BURST
// requests refilled at RATE_LIMIT_RPS; over it, a 429 problem with
// Retry-After, while another client is still served. Idle buckets are
// dropped, so memory does not grow with every client ever seen.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	cfg := iss.Config()
	cfg.RateRPS, cfg.RateBurst = 0.5, 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	a, err := auth.New(ctx, cfg, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(context.Background()) }()
	now := time.Now()
	auth.SetAuthClock(a, func() time.Time { return now })
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, nil, nil, a.Middleware)
	auth.Mount(r, log, []auth.Route{{Method: http.MethodGet, Pattern: "/contas/{id}", Scope: auth.ScopeAccountsRead,
		Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }}})
	tokens := map[string]string{}
	get := func(client string) (int, string) {
		if tokens[client] == "" {
			tokens[client] = iss.Bearer(t, client, auth.ScopeAccountsRead)
		}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/contas/X", nil)
		req.Header.Set("Authorization", tokens[client])
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("429 is not a problem: %q", rec.Header().Get("Content-Type"))
		}
		return rec.Code, rec.Header().Get("Retry-After")
	}
	var got []string
	for range 4 {
		code, retry := get("client-a")
		got = append(got, strconv.Itoa(code)+" "+retry)
	}
	code, _ := get("client-b")
	got = append(got, "b "+strconv.Itoa(code))
	now = now.Add(2 * time.Second) // one token back at 0.5 per second
	code, _ = get("client-a")
	got = append(got, strconv.Itoa(code))
	code, retry := get("client-a")
	got = append(got, strconv.Itoa(code)+" "+retry)
	want := []string{"200 ", "200 ", "200 ", "429 2", "b 200", "200", "429 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses and Retry-After mismatch (-want +got):\n%s", diff)
	}

	if code, _ := get("no-token-client"); code != http.StatusOK {
		t.Fatalf("client no-token-client: %d", code)
	}
	tokens["anonymous"] = "Basic eA=="
	if code, _ := get("anonymous"); code != http.StatusUnauthorized {
		t.Errorf("Basic: %d, want 401", code)
	}
	got2 := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "auth_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 || m.GetLabel()[0].GetValue() == "expired" {
				got2[m.GetLabel()[0].GetValue()] = v
			}
		}
	}
	// Every reason is exported from the start (expired stands for the
	// zeros); only those that happened have counted.
	if diff := cmp.Diff(map[string]float64{"expired": 0, "no_token": 1, "rate_limited": 2}, got2); diff != "" {
		t.Errorf("auth_requests_refused_total mismatch (-want +got):\n%s", diff)
	}

	if n := auth.LimiterSize(a); n != 3 {
		t.Errorf("%d buckets, want 2", n)
	}
	now = now.Add(11 * time.Minute) // both idle: the next request sweeps them
	if code, _ := get("client-c"); code != http.StatusOK {
		t.Errorf("client-c: %d", code)
	}
	if n := auth.LimiterSize(a); n != 1 {
		t.Errorf("%d buckets after the idle ones were swept, want 1", n)
	}
}
