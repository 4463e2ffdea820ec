package auth_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
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
				want := []any{401, tc.Challenge, httpapi.KindUnauthorized.TypeURI(), 401, "no-store"}
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
	if r.status != http.StatusBadRequest || r.problem.Type != httpapi.KindMalformed.TypeURI() {
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
			if tc.status == 403 && r.problem.Type != httpapi.KindForbidden.TypeURI() {
				t.Errorf("problem type %q, want %q", r.problem.Type, httpapi.KindForbidden.TypeURI())
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
