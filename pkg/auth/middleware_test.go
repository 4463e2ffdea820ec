package auth_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// api is a router as the services build it: the authenticator's
// middleware, then a route table. reached counts the requests a handler
// saw, and bodies the requests whose body a handler read.
type api struct {
	iss     *authtest.TestIssuer
	srv     *httptest.Server
	reached atomic.Int64
}

func newAPI(t *testing.T) *api {
	t.Helper()
	a := &api{iss: authtest.New(t)}
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, nil, nil, a.iss.Authenticator(t).Middleware)
	handler := func(w http.ResponseWriter, r *http.Request) {
		a.reached.Add(1)
		body, err := httpapi.ReadJSONBody(w, r)
		if err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		var v struct {
			X int `json:"x"`
		}
		if err := httpapi.DecodeStrict(body, &v); err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		p, _ := auth.FromContext(r.Context())
		httpapi.WriteJSON(w, http.StatusCreated, map[string]any{"sub": p.Subject, "scopes": p.Scopes})
	}
	auth.Mount(r, log, []auth.Route{
		{Method: http.MethodPost, Pattern: "/transferencias", Scope: auth.ScopeTransfersCreate, Handler: handler},
		{Method: http.MethodGet, Pattern: "/transferencias/{id}", Scope: auth.ScopeTransfersRead + " " + auth.ScopeOperations, Handler: handler},
		{Method: http.MethodGet, Pattern: "/openapi.yaml", Scope: auth.Public, Handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "openapi: 3.1.0\n")
		}},
	})
	a.srv = httptest.NewServer(r)
	t.Cleanup(a.srv.Close)
	return a
}

type result struct {
	status    int
	challenge string
	problem   httpapi.Problem
	body      string
	header    http.Header
}

func (a *api) do(t *testing.T, method, path, authorization, body string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := result{status: res.StatusCode, challenge: res.Header.Get("WWW-Authenticate"), body: string(raw), header: res.Header}
	if res.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.Unmarshal(raw, &r.problem); err != nil {
			t.Fatalf("problem body: %v: %s", err, raw)
		}
	}
	return r
}

// TestBadAuthorizations: every input of authtest.BadAuthorizations is a 401 problem with
// the challenge of the contract, and no handler runs; the same request
// with a malformed body is 401 too, never 400.
func TestBadAuthorizations(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for _, tc := range a.iss.BadAuthorizations(t) {
		for _, body := range []string{`{"valorEmCentavos":1}`, `{"valorEmCentavos":`} {
			t.Run(tc.Name+" "+body, func(t *testing.T) {
				r := a.do(t, http.MethodPost, "/transferencias", tc.Authorization, body)
				got := []any{r.status, r.challenge, r.problem.Type, r.problem.Status, r.header.Get("Cache-Control")}
				want := []any{401, tc.Challenge, httpapi.TypeURI(errkind.Unauthorized), 401, "no-store"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("{status challenge type problem.status cache-control} mismatch (-want +got):\n%s\nbody %s", diff, r.body)
				}
				if r.problem.Detail == "" || r.problem.RequestID == "" {
					t.Errorf("problem without detail or request id: %+v", r.problem)
				}
				if strings.Contains(r.body, strings.TrimPrefix(tc.Authorization, "Bearer ")) && len(tc.Authorization) > 10 {
					t.Errorf("the token is echoed in the problem: %s", r.body)
				}
			})
		}
	}
	if n := a.reached.Load(); n != 0 {
		t.Errorf("%d refused requests reached a handler", n)
	}
}

// TestGoodToken: a valid token reaches the handler with its principal;
// the scope check answers 403 with the needed scope; a good token with a
// malformed body is then the handler's 400.
func TestGoodToken(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	good := a.iss.Bearer(t, "client-a", auth.ScopeTransfersCreate, auth.ScopeAccountsRead)
	r := a.do(t, http.MethodPost, "/transferencias", good, `{"x":1}`)
	if r.status != http.StatusCreated || r.body != `{"scopes":["transferencias:criar","contas:ler"],"sub":"client-a"}`+"\n" {
		t.Errorf("good token: %d %s", r.status, r.body)
	}
	r = a.do(t, http.MethodPost, "/transferencias", good, `{"x":`)
	if r.status != http.StatusBadRequest || r.problem.Type != httpapi.TypeURI(errkind.Malformed) {
		t.Errorf("good token, malformed body: %d %s, want 400", r.status, r.body)
	}

	for _, tc := range []struct {
		name, bearer, method, path, challenge string
		status                                int
	}{
		{"read scope on a write route", a.iss.Bearer(t, "client-a", auth.ScopeTransfersRead), http.MethodPost, "/transferencias",
			`Bearer realm="paysuite", error="insufficient_scope", scope="transferencias:criar"`, 403},
		{"no scope at all", a.iss.Bearer(t, "client-a"), http.MethodGet, "/transferencias/1",
			`Bearer realm="paysuite", error="insufficient_scope", scope="transferencias:ler operacoes"`, 403},
		{"one of two alternative scopes", a.iss.Bearer(t, "ops", auth.ScopeOperations), http.MethodGet, "/transferencias/1", "", 201},
		{"wrong scope and malformed body", a.iss.Bearer(t, "client-a", auth.ScopeAccountsRead), http.MethodPost, "/transferencias",
			`Bearer realm="paysuite", error="insufficient_scope", scope="transferencias:criar"`, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"x":1}`
			if strings.Contains(tc.name, "malformed") {
				body = `{"x":`
			}
			r := a.do(t, tc.method, tc.path, tc.bearer, body)
			if r.status != tc.status || r.challenge != tc.challenge {
				t.Errorf("%d %q, want %d %q: %s", r.status, r.challenge, tc.status, tc.challenge, r.body)
			}
			if tc.status == 403 && r.problem.Type != httpapi.TypeURI(errkind.Forbidden) {
				t.Errorf("problem type %q, want %q", r.problem.Type, httpapi.TypeURI(errkind.Forbidden))
			}
		})
	}
}

// TestPublicRoutes: health, readiness, metrics and the OpenAPI document
// answer without a token; any other path, even an unknown one, does not.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/openapi.yaml": 200, "/nope": 401, "/healthz/x": 401} {
		if r := a.do(t, http.MethodGet, path, "", ""); r.status != want {
			t.Errorf("GET %s without a token: %d, want %d", path, r.status, want)
		}
	}
	if r := a.do(t, http.MethodPost, "/healthz", "", ""); r.status != 401 {
		t.Errorf("POST /healthz without a token: %d, want 401 (only GET is public)", r.status)
	}
}

// TestUncovered: the route walk finds a route mounted without a scope,
// and a table route marked public on a path that is not public.
func TestUncovered(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, nil, nil)
	noop := func(http.ResponseWriter, *http.Request) {}
	auth.Mount(r, log, []auth.Route{
		{Method: http.MethodPost, Pattern: "/ok", Scope: auth.ScopeAccountsAdmin, Handler: noop},
		{Method: http.MethodGet, Pattern: "/not-public", Scope: auth.Public, Handler: noop},
		{Method: http.MethodGet, Pattern: "/empty", Scope: " ", Handler: noop},
	})
	r.Get("/bare", noop)
	r.Route("/nested", func(r chi.Router) { r.Post("/x", noop) })
	got, err := auth.Uncovered(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GET /bare", "GET /empty", "GET /not-public", "POST /nested/x"}
	if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
		t.Errorf("uncovered routes mismatch (-want +got):\n%s", diff)
	}
}

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
// still answered 401, a token verified before from the same address is
// still served (a fresh one waits for the bucket), and the public paths
// stay unlimited. A forwarded-for header counts only when
// AUTH_TRUSTED_PROXY_HEADER names it and the peer is in
// AUTH_TRUSTED_PROXY_CIDRS, and then by its nearest value that is not a
// trusted proxy.
func TestRefusalLimitPerAddress(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	valid := iss.Bearer(t, "client-a", auth.ScopeAccountsRead)
	fresh := iss.Bearer(t, "client-b", auth.ScopeAccountsRead)

	t.Run("peer address", func(t *testing.T) {
		t.Parallel()
		do, _ := serveRefusals(t, iss, auth.RefusalLimit{RPS: 0.5, Burst: 3})
		got := []string{do("192.0.2.1:4000", valid, "/contas/X")} // verified: remembered
		for _, auth := range []string{"", "Bearer nope", "Bearer x.y.z", "Bearer nope", ""} {
			got = append(got, do("192.0.2.1:4000", auth, "/contas/X"))
		}
		got = append(got,
			do("192.0.2.1:4001", "", "/contas/X", "X-Forwarded-For", "203.0.113.9"), // not trusted: same bucket
			do("192.0.2.2:4000", "", "/contas/X"),
			do("192.0.2.1:4000", valid, "/contas/X"),
			do("192.0.2.1:4000", fresh, "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::1]:4000", "", "/contas/X"),
			do("[2001:db8::2]:4000", "", "/contas/X"), // the same /64
			do("[2001:db8:0:1::1]:4000", "", "/contas/X"),
		)
		want := []string{"OK", "Unauthorized", "Unauthorized", "Unauthorized", "429 2", "429 2",
			"429 2", "Unauthorized", "OK", "429 2",
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
		do, _ := serveRefusals(t, iss, auth.RefusalLimit{RPS: 0.5, Burst: 1, ClientIPHeader: "X-Forwarded-For",
			TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ff::7"}})
		got := []string{
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.1"),
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.2"),
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "203.0.113.7, 198.51.100.1"), // a client's own value comes first
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "198.51.100.3"),
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.4, 10.9.9.9"), // two trusted hops
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.4"),
			do("[2001:db8:ff::7]:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.5"),
			do("[2001:db8:ff::7]:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.5"),
			do("10.0.0.1:4000", "", "/contas/X"), // no header: the peer
			do("10.0.0.1:4000", "", "/contas/X", "X-Forwarded-For", "not an address"),
			// An untrusted peer's header is its own claim: ignored.
			do("192.0.2.50:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.9"),
			do("192.0.2.50:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.10"),
			do("[2001:db8:ff::8]:4000", "", "/contas/X", "X-Forwarded-For", "198.51.100.11"),
		}
		want := []string{"Unauthorized", "Unauthorized", "429 2", "Unauthorized", "Unauthorized", "429 2",
			"Unauthorized", "429 2", "Unauthorized", "429 2",
			"Unauthorized", "429 2", "Unauthorized"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestRefusalLimitBeforeVerification: from an address with no refusal
// left, tokens that were never verified are answered 429 without their
// signature being checked: neither a verification (a cache miss) nor a
// JWKS fetch for an unknown key id happens, however many come.
func TestRefusalLimitBeforeVerification(t *testing.T) {
	t.Parallel()
	iss := authtest.New(t)
	forger := authtest.New(t) // another key: its tokens fail verification
	do, reg := serveRefusals(t, iss, auth.RefusalLimit{RPS: 0.5, Burst: 2})
	for _, want := range []string{"Unauthorized", "Unauthorized", "429 2"} {
		if got := do("192.0.2.1:4000", forger.Bearer(t, "client-a", auth.ScopeAccountsRead), "/contas/X"); got != want {
			t.Fatalf("forged token: %s, want %s", got, want)
		}
	}
	misses, fetches := counter(t, reg, "auth_token_cache_misses_total"), iss.Fetches()
	for i := range 50 {
		if got := do("192.0.2.1:4000", forger.Bearer(t, "client-"+strconv.Itoa(i), auth.ScopeAccountsRead), "/contas/X"); got != "429 2" {
			t.Fatalf("forged token %d from an address over its limit: %s, want 429 2", i, got)
		}
	}
	if got := counter(t, reg, "auth_token_cache_misses_total"); got != misses {
		t.Errorf("%v tokens verified from an address over its limit, want none", got-misses)
	}
	if got := iss.Fetches(); got != fetches {
		t.Errorf("%d JWKS fetches caused by an address over its limit, want none", got-fetches)
	}
	if got := counter(t, reg, "auth_requests_refused_total"); got < 51 {
		t.Errorf("auth_requests_refused_total = %v, want at least 51", got)
	}
}

// serveRefusals serves /contas/{id} behind an authenticator of iss with
// limit, on a frozen clock; do sends one request from remote and answers
// its status text, or "429 <Retry-After>".
func serveRefusals(t *testing.T, iss *authtest.TestIssuer, limit auth.RefusalLimit) (func(remote, authorization, path string, headers ...string) string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := auth.New(context.Background(), iss.Config(), slog.New(slog.DiscardHandler), reg, auth.WithRefusalLimit(limit))
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
	}, reg
}

// counter is the sum of the metric name's series in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestRefusalLimitValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit auth.RefusalLimit
		want  string
	}{
		{auth.DefaultRefusalLimit, ""},
		{auth.RefusalLimit{RPS: 1, Burst: 1, ClientIPHeader: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/8", "192.0.2.7", "::ffff:172.16.0.0/108"}}, ""},
		{auth.RefusalLimit{RPS: 1, Burst: 1, ClientIPHeader: "X-Real-IP"}, "AUTH_TRUSTED_PROXY_CIDRS"},
		{auth.RefusalLimit{RPS: 1, Burst: 1, TrustedProxies: []string{"10.0.0.0/8"}}, "AUTH_TRUSTED_PROXY_HEADER"},
		{auth.RefusalLimit{RPS: 1, Burst: 1, ClientIPHeader: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/33"}}, "AUTH_TRUSTED_PROXY_CIDRS"},
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
