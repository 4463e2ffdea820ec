package auth_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

// TestRefusalLimitPerAddress: the requests refused for a missing or bad
// token take a bucket of their source address (AUTH_REFUSED_RATE_*); over
// it they are answered 429 with Retry-After, while another address is
// still answered 401, a valid token from the same address is still
// served, and the public paths stay unlimited. A forwarded-for header
// counts only when AUTH_TRUSTED_PROXY_HEADER names it, and then by its
// last value, the one the proxy added.
func TestRefusalLimitPerAddress(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	valid := iss.Bearer(t, "client-a", auth.ScopeAccountsRead)
	serve := func(t *testing.T, limit auth.RefusalLimit) func(remote, authorization, path string, headers ...string) string {
		t.Helper()
		a, err := auth.New(context.Background(), iss.Config(), slog.New(slog.DiscardHandler), prometheus.NewRegistry(), auth.WithRefusalLimit(limit))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		now := time.Now()
		auth.SetAuthClock(a, func() time.Time { return now })
		log := slog.New(slog.DiscardHandler)
		r := httpapi.NewRouter(log, nil, nil, func(context.Context) error { return nil }, a.Middleware)
		auth.Mount(r, log, []auth.Route{{Method: http.MethodGet, Pattern: "/contas/{id}", Scope: auth.ScopeAccountsRead,
			Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }}})
		return func(remote, authorization, path string, headers ...string) string {
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
			req.RemoteAddr = remote
			if authorization != "" {
				req.Header.Set("Authorization", authorization)
			}
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Add(headers[i], headers[i+1])
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code == http.StatusTooManyRequests {
				return "429 " + rec.Header().Get("Retry-After")
			}
			return http.StatusText(rec.Code)
		}
	}

	t.Run("peer address", func(t *testing.T) {
		t.Parallel()
		do := serve(t, auth.RefusalLimit{RPS: 0.5, Burst: 3})
		var got []string
		for _, auth := range []string{"", "Bearer nope", "Bearer x.y.z", "Bearer nope", ""} {
			got = append(got, do("192.0.2.1:4000", auth, "/contas/X"))
		}
		got = append(got,
			do("192.0.2.1:4001", "", "/contas/X", "X-Forwarded-For", "203.0.113.9"), // not trusted: same bucket
			do("192.0.2.2:4000", "", "/contas/X"),
			do("192.0.2.1:4000", valid, "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::2]:4000", "", "/contas/X"), // the same /64
			do("[2001:db8:0:1::1]:4000", "", "/contas/X"),
		)
		want := []string{"Unauthorized", "Unauthorized", "Unauthorized", "429 2", "429 2",
			"429 2", "Unauthorized", "OK",
			"Unauthorized", "Unauthorized", "Unauthorized", "429 2", "Unauthorized"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers mismatch (-want +got):\n%s", diff)
		}
		for _, path := range auth.PublicPaths {
			for range 50 {
				if got := do("192.0.2.1:4000", "", path); strings.HasPrefix(got, "429") {
					t.Fatalf("public %s from an address over its limit: %s", path, got)
				}
			}
		}
	})

	t.Run("trusted proxy header", func(t *testing.T) {
		t.Parallel()
		do := serve(t, auth.RefusalLimit{RPS: 0.5, Burst: 1, ClientIPHeader: "X-Forwarded-For"})
		got := []string{
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.1"),
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.2"),
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "203.0.113.7, 198.51.100.1"), // a client's own value comes first
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "198.51.100.3"),
			do("10.0.0.1:4000", "", "/contas/X"), // no header: the peer
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "not an address"),
		}
		want := []string{"Unauthorized", "Unauthorized", "429 2", "Unauthorized", "Unauthorized", "429 2"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestRefusalLimitValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit auth.RefusalLimit
		want  string
	}{
		{auth.DefaultRefusalLimit, ""},
		{auth.RefusalLimit{RPS: 1, Burst: 1, ClientIPHeader: "X-Real-IP"}, ""},
		{auth.RefusalLimit{RPS: 0, Burst: 1}, "AUTH_REFUSED_RATE_RPS"},
		{auth.RefusalLimit{RPS: 1, Burst: 0}, "AUTH_REFUSED_RATE_BURST"},
		{auth.RefusalLimit{RPS: 1, Burst: 1, ClientIPHeader: "X Forwarded"}, "AUTH_TRUSTED_PROXY_HEADER"},
	} {
		err := tc.limit.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.limit, err, tc.want)
		}
	}
}
