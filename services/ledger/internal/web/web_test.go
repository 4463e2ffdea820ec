package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
	"github.com/paysuite/payments/services/ledger/internal/web"
	"github.com/paysuite/payments/test/support/logtest"
)

type api struct {
	srv   *httptest.Server
	store *postgres.Store
	db    *pgplatform.DB
}

// headerClient names the client a test request acts as; the test-only
// middleware asClient turns it into the request's principal, as the
// authentication middleware does with a verified token.
const headerClient = authtest.HeaderClient

// headerScopes names the scopes of a test request's principal, separated
// by spaces; absent: clientScopes.
const headerScopes = "X-Test-Scopes"

// noClient as the X-Test-Client value sends the request without a
// principal.
const noClient = authtest.NoClient

// clientScopes are the scopes of a test request's principal unless
// X-Test-Scopes says otherwise: the accounts scopes, operacoes not among
// them.
var clientScopes = []string{auth.ScopeAccountsAdmin, auth.ScopeAccountsDeposit, auth.ScopeAccountsRead}

// operator are the headers of a request by an operator ("ops", scopes
// contas:admin, contas:ler and operacoes).
var operator = []string{headerClient, "ops", headerScopes, auth.ScopeAccountsAdmin + " " + auth.ScopeAccountsRead + " " + auth.ScopeOperations}

// asClient puts a principal into the request context: the client of
// X-Test-Client, ledgertest.Client by default, none for noClient, with
// the scopes of X-Test-Scopes or clientScopes.
var asClient = authtest.AsHeaderClient(ledgertest.Client, func(r *http.Request) []string {
	if v := r.Header.Get(headerScopes); v != "" {
		return strings.Fields(v)
	}
	return clientScopes
})

func newAPI(tb testing.TB) *api {
	tb.Helper()
	return newAPIWithLog(tb, slog.New(slog.DiscardHandler))
}

func newAPIWithLog(tb testing.TB, log *slog.Logger) *api {
	tb.Helper()
	db := ledgertest.NewDB(tb)
	store := postgres.New(db, outbox.New(db))
	iss := authtest.New(tb)
	r := httpapi.NewRouter(log, nil, nil, nil, iss.Authenticator(tb).Middleware)
	r.Group(func(r chi.Router) {
		r.Use(asClient)
		web.New(ledger.NewService(store, ledger.Rules{Topics: ledgertest.Topics}, nil), log).Routes(r)
	})
	// Every request is client-a's with every scope unless it says otherwise.
	srv := httptest.NewServer(authtest.WithTokenUnlessNoClient(r, iss.Bearer(tb, "client-a", authtest.AllScopes...)))
	tb.Cleanup(srv.Close)
	return &api{srv: srv, store: store, db: db}
}

type response struct {
	status  int
	header  http.Header
	body    map[string]any
	rawBody string
}

// do sends a request; body is sent as application/json unless headers say
// otherwise.
func (a *api) do(tb testing.TB, method, path, body string, headers ...string) response {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	given := map[string]bool{}
	for i := 0; i+1 < len(headers); i += 2 {
		if given[headers[i]] { // a header given twice is sent twice
			req.Header.Add(headers[i], headers[i+1])
			continue
		}
		given[headers[i]] = true
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, rawBody: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			tb.Fatalf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	return r
}

// problemType returns the problem type of an error response, checking it
// is problem+json.
// isProblem fails tb at once unless r has status. With problem empty it
// reports false; otherwise it checks that r is that problem and reports
// true: the case is an error answer and has no body to check further.
func isProblem(tb testing.TB, r response, status int, problem string) bool {
	tb.Helper()
	if r.status != status {
		tb.Fatalf("status = %d, want %d (body %s)", r.status, status, r.rawBody)
	}
	if problem == "" {
		return false
	}
	if got := problemType(tb, r); got != problem {
		tb.Errorf("problem type = %q, want %q", got, problem)
	}
	return true
}

func problemType(tb testing.TB, r response) string {
	tb.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Errorf("error Content-Type = %q, want application/problem+json (body %s)", ct, r.rawBody)
	}
	s, _ := r.body["type"].(string)
	return strings.TrimPrefix(s, httpapi.ProblemTypeBase)
}

func TestOpenAccount(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	if r := a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`); r.status != http.StatusCreated {
		t.Fatalf("first open: %d %s", r.status, r.rawBody)
	}
	tests := []struct {
		name        string
		body        string
		contentType string
		status      int
		problem     string   // problem type, for errors
		fields      []string // invalid fields, for validation errors
		want        map[string]any
	}{
		{name: "new account", body: `{"id":"CC-002","moeda":"USD"}`, status: 201,
			want: map[string]any{"id": "CC-002", "moeda": "USD", "saldoEmCentavos": 0.0, "titular": ledgertest.Client}},
		{name: "new account of another titular", body: `{"id":"CC-004","moeda":"BRL","titular":"ana"}`, status: 201,
			want: map[string]any{"id": "CC-004", "moeda": "BRL", "saldoEmCentavos": 0.0, "titular": "ana"}},
		{name: "same id, currency and titular again", body: `{"id":"CC-004","moeda":"BRL","titular":"ana"}`, status: 200,
			want: map[string]any{"id": "CC-004", "moeda": "BRL", "saldoEmCentavos": 0.0, "titular": "ana"}},
		{name: "same id and currency, other titular", body: `{"id":"CC-004","moeda":"BRL","titular":"bruno"}`, status: 409, problem: "conflict"},
		{name: "same id and currency, caller not the titular", body: `{"id":"CC-004","moeda":"BRL"}`, status: 409, problem: "conflict"},
		{name: "empty titular", body: `{"id":"CC-005","moeda":"BRL","titular":""}`, status: 422, problem: "validation-failed", fields: []string{"titular"}},
		{name: "null titular is the caller", body: `{"id":"CC-005","moeda":"BRL","titular":null}`, status: 201,
			want: map[string]any{"id": "CC-005", "moeda": "BRL", "saldoEmCentavos": 0.0, "titular": ledgertest.Client}},
		{name: "same id and currency again", body: `{"id":"CC-001","moeda":"BRL"}`, status: 200,
			want: map[string]any{"id": "CC-001", "moeda": "BRL", "saldoEmCentavos": 0.0, "titular": ledgertest.Client}},
		{name: "same id, other currency", body: `{"id":"CC-001","moeda":"USD"}`, status: 409, problem: "conflict"},
		{name: "id too long", body: `{"id":"` + strings.Repeat("a", 33) + `","moeda":"BRL"}`, status: 422,
			problem: "validation-failed", fields: []string{"id"}},
		{name: "id with a space", body: `{"id":"CC 1","moeda":"BRL"}`, status: 422, problem: "validation-failed", fields: []string{"id"}},
		{name: "empty id and currency", body: `{}`, status: 422, problem: "validation-failed", fields: []string{"id", "moeda"}},
		{name: "funding prefix", body: `{"id":"__FUNDING__BRL","moeda":"BRL"}`, status: 422, problem: "validation-failed", fields: []string{"id"}},
		{name: "lower-case currency", body: `{"id":"CC-003","moeda":"brl"}`, status: 422, problem: "validation-failed", fields: []string{"moeda"}},
		{name: "two-letter currency", body: `{"id":"CC-003","moeda":"BR"}`, status: 422, problem: "validation-failed", fields: []string{"moeda"}},
		{name: "unknown field", body: `{"id":"CC-003","moeda":"BRL","saldo":5}`, status: 400, problem: "malformed-request", fields: []string{"saldo"}},
		{name: "wrong type", body: `{"id":3,"moeda":"BRL"}`, status: 400, problem: "malformed-request", fields: []string{"id"}},
		{name: "null", body: `{"id":null,"moeda":"BRL"}`, status: 400, problem: "malformed-request", fields: []string{"id"}},
		{name: "not JSON", body: `{"id":`, status: 400, problem: "malformed-request"},
		{name: "duplicate key", body: `{"id":"CC-009","moeda":"BRL","id":"CC-010"}`, status: 400, problem: "malformed-request", fields: []string{"id"}},
		{name: "+json content type", body: `{"id":"CC-011","moeda":"BRL"}`, contentType: "application/vnd.paysuite+json", status: 415, problem: "unsupported-media-type"},
		{name: "not JSON content type", body: `{"id":"CC-003","moeda":"BRL"}`, contentType: "text/plain", status: 415, problem: "unsupported-media-type"},
		{name: "too large", body: `{"id":"CC-003","moeda":"BRL","x":"` + strings.Repeat("x", 70<<10) + `"}`, status: 413, problem: "payload-too-large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.contentType != "" {
				headers = []string{"Content-Type", tc.contentType}
			}
			r := a.do(t, "POST", "/contas", tc.body, headers...)
			if isProblem(t, r, tc.status, tc.problem) {
				if diff := cmp.Diff(tc.fields, fieldNames(r)); diff != "" {
					t.Errorf("invalid fields mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tc.want, r.body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if loc := r.header.Get("Location"); loc != "/contas/"+tc.want["id"].(string) {
				t.Errorf("Location = %q", loc)
			}
		})
	}
	// The refused requests opened nothing.
	for _, id := range []string{"CC-003", "CC-009", "CC-010", "CC-011"} {
		if r := a.do(t, "GET", "/contas/"+id, ""); r.status != http.StatusNotFound {
			t.Errorf("GET /contas/%s = %d, want 404: a refused request opened it", id, r.status)
		}
	}
}

func fieldNames(r response) []string {
	errs, _ := r.body["errors"].([]any)
	var out []string
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m["field"].(string))
		}
	}
	return out
}

func TestDeposit(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for _, body := range []string{`{"id":"CC-001","moeda":"BRL"}`, `{"id":"CC-002","moeda":"BRL"}`} {
		if r := a.do(t, "POST", "/contas", body); r.status != http.StatusCreated {
			t.Fatalf("open: %d %s", r.status, r.rawBody)
		}
	}
	key := uuid.NewString()
	first := a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":100000}`, "Idempotency-Key", key)
	if first.status != http.StatusCreated {
		t.Fatalf("deposit: %d %s", first.status, first.rawBody)
	}
	if got := first.body["saldoEmCentavos"]; got != 100000.0 {
		t.Errorf("saldoEmCentavos = %v, want 100000", got)
	}
	if first.header.Get(web.HeaderReplayed) != "" {
		t.Error("a first deposit is marked replayed")
	}
	// A later deposit, so that a replay of the first cannot just echo the
	// current balance.
	if r := a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":5}`, "Idempotency-Key", uuid.NewString()); r.status != 201 {
		t.Fatalf("second deposit: %d %s", r.status, r.rawBody)
	}

	tests := []struct {
		name        string
		path        string
		key         string
		secondKey   string
		body        string
		contentType string
		client      string // X-Test-Client
		status      int
		problem     string
		replayed    bool
	}{
		{name: "replay", path: "/contas/CC-001/depositos", key: key, body: `{"valorEmCentavos":100000}`, status: 201, replayed: true},
		{name: "same key and body, another client", path: "/contas/CC-001/depositos", key: key, body: `{"valorEmCentavos":100000}`,
			client: "bruno", status: 422, problem: "idempotency-key-reused"},
		{name: "no principal", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`,
			client: noClient, status: 401, problem: "unauthorized"},
		{name: "same key, other amount", path: "/contas/CC-001/depositos", key: key, body: `{"valorEmCentavos":100001}`,
			status: 422, problem: "idempotency-key-reused"},
		{name: "same key, other account", path: "/contas/CC-002/depositos", key: key, body: `{"valorEmCentavos":100000}`,
			status: 422, problem: "idempotency-key-reused"},
		{name: "no key", path: "/contas/CC-001/depositos", body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "key not a UUID", path: "/contas/CC-001/depositos", key: "abc", body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "braced key", path: "/contas/CC-001/depositos", key: "{" + uuid.NewString() + "}", body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "URN key", path: "/contas/CC-001/depositos", key: "urn:uuid:" + uuid.NewString(), body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "32-hex key", path: "/contas/CC-001/depositos", key: strings.ReplaceAll(uuid.NewString(), "-", ""), body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "two keys", path: "/contas/CC-001/depositos", key: uuid.NewString(), secondKey: uuid.NewString(), body: `{"valorEmCentavos":1}`, status: 400, problem: "invalid-idempotency-key"},
		{name: "upper-case key", path: "/contas/CC-001/depositos", key: strings.ToUpper(uuid.NewString()), body: `{"valorEmCentavos":3}`, status: 201},
		{name: "escaped account id", path: "/contas/%43C-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":4}`, status: 201},
		{name: "duplicate JSON key", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1,"valorEmCentavos":999999}`, status: 400, problem: "malformed-request"},
		{name: "+json content type", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`,
			contentType: "application/merge-patch+json", status: 415, problem: "unsupported-media-type"},
		{name: "latin1 charset", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`,
			contentType: "application/json; charset=latin1", status: 415, problem: "unsupported-media-type"},
		{name: "unknown account", path: "/contas/CC-404/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`, status: 404, problem: "not-found"},
		{name: "funding account", path: "/contas/__FUNDING__BRL/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`, status: 422, problem: "validation-failed"},
		{name: "zero", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":0}`, status: 422, problem: "validation-failed"},
		{name: "negative", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":-1}`, status: 422, problem: "validation-failed"},
		{name: "missing amount", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{}`, status: 422, problem: "validation-failed"},
		{name: "above 10^15", path: "/contas/CC-002/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1000000000000001}`, status: 422, problem: "validation-failed"},
		{name: "exactly 10^15", path: "/contas/CC-002/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1000000000000000}`, status: 201},
		{name: "float", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1.5}`, status: 400, problem: "malformed-request"},
		{name: "string", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":"1"}`, status: 400, problem: "malformed-request"},
		{name: "overflowing int64", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":9223372036854775808}`, status: 400, problem: "malformed-request"},
		{name: "unknown field", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valor":1}`, status: 400, problem: "malformed-request"},
		{name: "not JSON content type", path: "/contas/CC-001/depositos", key: uuid.NewString(), body: `{"valorEmCentavos":1}`,
			contentType: "text/plain", status: 415, problem: "unsupported-media-type"},
		{name: "too large", path: "/contas/CC-001/depositos", key: uuid.NewString(),
			body: `{"valorEmCentavos":1,"x":"` + strings.Repeat("x", 70<<10) + `"}`, status: 413, problem: "payload-too-large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.key != "" {
				headers = []string{"Idempotency-Key", tc.key}
			}
			if tc.secondKey != "" {
				headers = append(headers, "Idempotency-Key", tc.secondKey)
			}
			if tc.contentType != "" {
				headers = append(headers, "Content-Type", tc.contentType)
			}
			if tc.client != "" {
				headers = append(headers, headerClient, tc.client)
			}
			r := a.do(t, "POST", tc.path, tc.body, headers...)
			if isProblem(t, r, tc.status, tc.problem) {
				return
			}
			if got := r.header.Get(web.HeaderReplayed) == "true"; got != tc.replayed {
				t.Errorf("replayed header = %v, want %v", got, tc.replayed)
			}
			if tc.replayed {
				if diff := cmp.Diff(first.body, r.body); diff != "" {
					t.Errorf("replay body mismatch (-first +replay):\n%s", diff)
				}
			}
		})
	}

	// Only the real deposits to CC-001 (two, the upper-case key's and the
	// escaped id's) and the 10^15 one moved money.
	got := map[string]any{}
	for _, id := range []string{"CC-001", "CC-002", "__FUNDING__BRL"} {
		r := a.do(t, "GET", "/contas/"+id, "", operator...)
		got[id] = r.body["saldoEmCentavos"]
	}
	want := map[string]any{"CC-001": 100012.0, "CC-002": 1e15, "__FUNDING__BRL": -(1e15 + 100012)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
}

func TestConcurrentDepositsWithOneKeyCreditOnce(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	if r := a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`); r.status != 201 {
		t.Fatalf("open: %d", r.status)
	}
	key := uuid.NewString()
	const n = 8
	rs := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rs[i] = a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":700}`, "Idempotency-Key", key)
		})
	}
	wg.Wait()
	fresh := 0
	for _, r := range rs {
		if r.status != 201 {
			t.Fatalf("status %d: %s", r.status, r.rawBody)
		}
		if r.header.Get(web.HeaderReplayed) == "" {
			fresh++
		}
		if diff := cmp.Diff(rs[0].body, r.body); diff != "" {
			t.Errorf("responses differ (-first +this):\n%s", diff)
		}
	}
	if fresh != 1 {
		t.Errorf("%d responses not marked replayed, want 1", fresh)
	}
	if r := a.do(t, "GET", "/contas/CC-001", ""); r.body["saldoEmCentavos"] != 700.0 {
		t.Errorf("balance = %v, want 700", r.body["saldoEmCentavos"])
	}
}

func TestGetAccount(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`)
	a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":42}`, "Idempotency-Key", uuid.NewString())
	tests := []struct {
		path   string
		status int
		want   map[string]any
	}{
		{"/contas/CC-001", 200, map[string]any{"id": "CC-001", "moeda": "BRL", "saldoEmCentavos": 42.0, "titular": ledgertest.Client,
			"reservadoEmCentavos": 0.0, "disponivelEmCentavos": 42.0}},
		{"/contas/__FUNDING__BRL", 404, nil}, // no titular: operators only
		{"/contas/%43C-001", 200, map[string]any{"id": "CC-001", "moeda": "BRL", "saldoEmCentavos": 42.0, "titular": ledgertest.Client,
			"reservadoEmCentavos": 0.0, "disponivelEmCentavos": 42.0}},
		{"/contas/%43%43%2D001", 200, map[string]any{"id": "CC-001", "moeda": "BRL", "saldoEmCentavos": 42.0, "titular": ledgertest.Client,
			"reservadoEmCentavos": 0.0, "disponivelEmCentavos": 42.0}},
		{"/contas/CC-404", 404, nil},
		{"/contas/CC%2F001", 404, nil},
		{"/contas/" + strings.Repeat("x", 40), 404, nil},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			r := a.do(t, "GET", tc.path, "")
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d (%s)", r.status, tc.status, r.rawBody)
			}
			if tc.status == 404 {
				if got := problemType(t, r); got != "not-found" {
					t.Errorf("problem type = %q", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, r.body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
	r := a.do(t, "GET", "/contas/__FUNDING__BRL", "", operator...)
	if diff := cmp.Diff(map[string]any{"id": "__FUNDING__BRL", "moeda": "BRL", "saldoEmCentavos": -42.0,
		"reservadoEmCentavos": 0.0, "disponivelEmCentavos": -42.0}, r.body); r.status != 200 || diff != "" {
		t.Errorf("the funding account read by an operator: %d, mismatch (-want +got):\n%s", r.status, diff)
	}
}

func TestPostingsPagination(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	for _, id := range []string{"CC-001", "CC-002"} {
		a.do(t, "POST", "/contas", `{"id":"`+id+`","moeda":"BRL"}`)
	}
	// 7 deposits and 10 transfers in and out: 17 postings on CC-001.
	type entry struct {
		id        string
		direction string
		amount    float64
	}
	var want []entry // oldest first
	for i := range 7 {
		key := uuid.New()
		amount := int64(1000 + i)
		if r := a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":`+itoa(amount)+`}`, "Idempotency-Key", key.String()); r.status != 201 {
			t.Fatalf("deposit: %d %s", r.status, r.rawBody)
		}
		want = append(want, entry{key.String(), "C", float64(amount)})
	}
	for i := range 10 {
		src, dst, dir := "CC-001", "CC-002", "D"
		if i%3 == 2 {
			src, dst, dir = dst, src, "C"
		}
		tr := ledger.Transfer{ID: uuid.New(), EventID: uuid.New(), Source: src, Dest: dst, AmountCents: int64(10 + i), Currency: "BRL", ClientID: ledgertest.Client}
		tr.Authorization = ledgertest.Authorize(transfersig.Claim{TransferID: tr.ID, Source: src, Destination: dst,
			AmountCents: tr.AmountCents, Currency: "BRL", Client: ledgertest.Client})
		rs, err := a.store.Settle(ctx, []ledger.Transfer{tr}, ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}.Decider(time.Now()))
		if err != nil || rs[0].Outcome != ledger.Settled {
			t.Fatalf("settle: %v %v", rs, err)
		}
		want = append(want, entry{tr.ID.String(), dir, float64(10 + i)})
	}

	for _, limit := range []int{1, 3, 5, 17, 50, 200} {
		t.Run("limite="+itoa(int64(limit)), func(t *testing.T) {
			var got []entry
			var ids []float64
			path := "/contas/CC-001/lancamentos?limite=" + itoa(int64(limit))
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("pagination does not end")
				}
				r := a.do(t, "GET", path, "")
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.rawBody)
				}
				items := r.body["itens"].([]any)
				if len(items) > limit {
					t.Fatalf("page of %d items, limite %d", len(items), limit)
				}
				for _, it := range items {
					m := it.(map[string]any)
					got = append(got, entry{m["transferenciaId"].(string), m["tipo"].(string), m["valorEmCentavos"].(float64)})
					ids = append(ids, m["id"].(float64))
					if _, err := time.Parse(time.RFC3339Nano, m["criadoEm"].(string)); err != nil {
						t.Errorf("criadoEm: %v", err)
					}
				}
				next, isString := r.body["proximoCursor"].(string)
				if !isString {
					if v, present := r.body["proximoCursor"]; !present || v != nil {
						t.Fatalf("proximoCursor = %v, want a string or null", v)
					}
					break
				}
				if len(items) != limit {
					t.Errorf("a page before the last has %d items, want %d", len(items), limit)
				}
				path = "/contas/CC-001/lancamentos?limite=" + itoa(int64(limit)) + "&cursor=" + next
			}
			// Newest first, every posting once.
			reversed := make([]entry, len(want))
			for i, e := range want {
				reversed[len(want)-1-i] = e
			}
			if diff := cmp.Diff(reversed, got, cmp.AllowUnexported(entry{})); diff != "" {
				t.Errorf("postings mismatch (-want +got):\n%s", diff)
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] >= ids[i-1] {
					t.Errorf("posting ids not strictly decreasing at %d: %v", i, ids)
				}
			}
		})
	}
}

func TestPostingsErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`)
	tests := []struct {
		path    string
		status  int
		problem string
	}{
		{"/contas/CC-001/lancamentos", 200, ""},
		{"/contas/CC-001/lancamentos?limite=200", 200, ""},
		{"/contas/CC-001/lancamentos?limite=0", 422, "validation-failed"},
		{"/contas/CC-001/lancamentos?limite=201", 422, "validation-failed"},
		{"/contas/CC-001/lancamentos?limite=ten", 400, "malformed-request"},
		{"/contas/CC-001/lancamentos?limite=", 400, "malformed-request"},
		{"/contas/CC-001/lancamentos?limite=5&limite=500", 400, "malformed-request"},
		{"/contas/CC-001/lancamentos?cursor=&cursor=x", 400, "malformed-request"},
		{"/contas/CC-001/lancamentos?cursor=not-a-cursor", 400, "malformed-request"},
		{"/contas/CC-001/lancamentos?cursor=djE6LTE", 400, "malformed-request"}, // "v1:-1"
		{"/contas/CC-404/lancamentos", 404, "not-found"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			r := a.do(t, "GET", tc.path, "")
			if isProblem(t, r, tc.status, tc.problem) {
				return
			}
			if diff := cmp.Diff(map[string]any{"itens": []any{}, "proximoCursor": nil}, r.body); diff != "" {
				t.Errorf("empty page mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestOpenAccountWithoutPrincipalIs401(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	r := a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`, headerClient, noClient)
	if r.status != http.StatusUnauthorized || problemType(t, r) != "unauthorized" {
		t.Fatalf("open without a principal: %d %s", r.status, r.rawBody)
	}
	if r := a.do(t, "GET", "/contas/CC-001", ""); r.status != http.StatusNotFound {
		t.Errorf("the account exists after a 401: %d %s", r.status, r.rawBody)
	}
}

// An account opened before ownership existed has no titular: only an
// operator gives it one (re-opening it with a titular), once; a client's
// attempt is a 409 that changes nothing; the titular never changes.
func TestOnlyAnOperatorGivesALegacyAccountItsTitular(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	if _, err := a.db.Exec(ctx, `INSERT INTO account (id, currency) VALUES ('CC-OLD', 'BRL')`); err != nil {
		t.Fatal(err)
	}
	holder := func() *string {
		t.Helper()
		var h *string
		if err := a.db.QueryRow(ctx, `SELECT holder FROM account WHERE id = 'CC-OLD'`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if r := a.do(t, "GET", "/contas/CC-OLD", "", operator...); r.status != 200 || r.body["titular"] != nil {
		t.Fatalf("legacy account read by an operator: %d %s, want 200 without titular", r.status, r.rawBody)
	}
	if r := a.do(t, "GET", "/contas/CC-OLD", ""); r.status != http.StatusNotFound {
		t.Errorf("legacy account read by a client: %d %s, want 404", r.status, r.rawBody)
	}
	for _, body := range []string{`{"id":"CC-OLD","moeda":"BRL"}`, `{"id":"CC-OLD","moeda":"BRL","titular":"` + ledgertest.Client + `"}`,
		`{"id":"CC-OLD","moeda":"BRL","titular":"ana"}`} {
		r := a.do(t, "POST", "/contas", body)
		if r.status != http.StatusConflict || problemType(t, r) != "conflict" {
			t.Errorf("claim by a client with %s: %d %s, want a 409 conflict", body, r.status, r.rawBody)
		}
		if h := holder(); h != nil {
			t.Fatalf("a client's claim set the titular to %q", *h)
		}
	}
	r := a.do(t, "POST", "/contas", `{"id":"CC-OLD","moeda":"BRL","titular":"ana"}`, operator...)
	if r.status != http.StatusOK || r.body["titular"] != "ana" {
		t.Fatalf("an operator's claim for ana: %d %s, want 200 with titular ana", r.status, r.rawBody)
	}
	if r := a.do(t, "POST", "/contas", `{"id":"CC-OLD","moeda":"BRL","titular":"ana"}`, operator...); r.status != http.StatusOK {
		t.Errorf("the same claim again: %d %s, want 200", r.status, r.rawBody)
	}
	if r := a.do(t, "POST", "/contas", `{"id":"CC-OLD","moeda":"BRL","titular":"bruno"}`, operator...); r.status != http.StatusConflict {
		t.Errorf("re-open with another titular: %d %s, want 409", r.status, r.rawBody)
	}
	if r := a.do(t, "POST", "/contas", `{"id":"CC-OLD","moeda":"USD","titular":"ana"}`, operator...); r.status != http.StatusConflict {
		t.Errorf("re-open in another currency: %d %s, want 409", r.status, r.rawBody)
	}
	if _, err := a.db.Exec(ctx, `UPDATE account SET holder = 'bruno' WHERE id = 'CC-OLD'`); err == nil {
		t.Error("the schema let a titular change")
	}
	if h := holder(); h == nil || *h != "ana" {
		t.Errorf("titular after the attempts = %v, want ana", h)
	}
}

// An account and its postings answer only its titular and operators: any
// other client gets the very problem an unknown account gets (only the
// instance, the path asked, and the request id differ).
func TestAccountsArePrivate(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-ANA","moeda":"BRL","titular":"ana"}`)
	a.do(t, "POST", "/contas/CC-ANA/depositos", `{"valorEmCentavos":42}`, "Idempotency-Key", uuid.NewString())
	ana := []string{headerClient, "ana"}
	bruno := []string{headerClient, "bruno"}
	scrub := func(r response, path string) map[string]any {
		t.Helper()
		if r.body["instance"] != path {
			t.Errorf("instance = %v, want %s", r.body["instance"], path)
		}
		m := maps.Clone(r.body)
		delete(m, "instance")
		delete(m, "requestId")
		return m
	}
	for _, sub := range []string{"", "/lancamentos", "/lancamentos?limite=5", "/saldo?em=2030-01-01T00:00:00Z",
		"/extrato?desde=2026-01-01T00:00:00Z&ate=2026-02-01T00:00:00Z"} {
		t.Run("GET /contas/{id}"+sub, func(t *testing.T) {
			if r := a.do(t, "GET", "/contas/CC-ANA"+sub, "", ana...); r.status != http.StatusOK {
				t.Errorf("the titular: %d %s, want 200", r.status, r.rawBody)
			}
			if r := a.do(t, "GET", "/contas/CC-ANA"+sub, "", operator...); r.status != http.StatusOK {
				t.Errorf("an operator: %d %s, want 200", r.status, r.rawBody)
			}
			other := a.do(t, "GET", "/contas/CC-ANA"+sub, "", bruno...)
			unknown := a.do(t, "GET", "/contas/CC-NONE"+sub, "", bruno...)
			if other.status != http.StatusNotFound || unknown.status != http.StatusNotFound {
				t.Fatalf("another client: %d %s; unknown: %d %s; want 404 both", other.status, other.rawBody, unknown.status, unknown.rawBody)
			}
			path := func(id string) string { p, _, _ := strings.Cut("/contas/"+id+sub, "?"); return p }
			if diff := cmp.Diff(scrub(unknown, path("CC-NONE")), scrub(other, path("CC-ANA"))); diff != "" {
				t.Errorf("another client's account vs an unknown one (-unknown +other):\n%s", diff)
			}
			if diff := cmp.Diff(unknown.header.Values("Content-Type"), other.header.Values("Content-Type")); diff != "" {
				t.Errorf("Content-Type differs (-unknown +other):\n%s", diff)
			}
		})
	}
}

// Each deposit is recorded with its client, request id, account, currency
// and amount, and GET /ops/depositos lists them, newest first, for
// operators only.
func TestDepositsAreRecordedAndListed(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.do(t, "POST", "/contas", `{"id":"CC-USD","moeda":"USD"}`)
	keys := []string{uuid.NewString(), uuid.NewString()}
	for i, key := range keys {
		r := a.do(t, "POST", "/contas/CC-USD/depositos", `{"valorEmCentavos":`+itoa(int64(100+i))+`}`,
			"Idempotency-Key", key, headerClient, "tesouraria", "X-Request-Id", "req-"+itoa(int64(i)))
		if r.status != http.StatusCreated {
			t.Fatalf("deposit: %d %s", r.status, r.rawBody)
		}
	}
	var row []any
	var client, request, account, currency string
	var cents int64
	if err := a.db.QueryRow(context.Background(), `SELECT client_id, request_id, account_id, currency, amount_cents FROM deposit WHERE id = $1`,
		keys[0]).Scan(&client, &request, &account, &currency, &cents); err != nil {
		t.Fatal(err)
	}
	row = append(row, client, request, account, currency, cents)
	if diff := cmp.Diff([]any{"tesouraria", "req-0", "CC-USD", "USD", int64(100)}, row); diff != "" {
		t.Errorf("deposit row mismatch (-want +got):\n%s", diff)
	}

	r := a.do(t, "GET", "/ops/depositos?limite=10", "", operator...)
	if r.status != http.StatusOK {
		t.Fatalf("GET /ops/depositos: %d %s", r.status, r.rawBody)
	}
	var got []map[string]any
	for _, it := range r.body["itens"].([]any) {
		m := it.(map[string]any)
		if _, err := time.Parse(time.RFC3339Nano, m["criadoEm"].(string)); err != nil {
			t.Errorf("criadoEm: %v", err)
		}
		delete(m, "criadoEm")
		got = append(got, m)
	}
	want := []map[string]any{
		{"id": keys[1], "contaId": "CC-USD", "moeda": "USD", "valorEmCentavos": 101.0, "cliente": "tesouraria", "requestId": "req-1"},
		{"id": keys[0], "contaId": "CC-USD", "moeda": "USD", "valorEmCentavos": 100.0, "cliente": "tesouraria", "requestId": "req-0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing mismatch (-want +got):\n%s", diff)
	}
	if r := a.do(t, "GET", "/ops/depositos?limite=1", "", operator...); len(r.body["itens"].([]any)) != 1 {
		t.Errorf("limite=1: %s", r.rawBody)
	}
	for q, want := range map[string]string{"limite=0": "validation-failed", "limite=201": "validation-failed", "limite=x": "malformed-request",
		"limite=": "malformed-request", "limite=5&limite=500": "malformed-request"} {
		if r := a.do(t, "GET", "/ops/depositos?"+q, "", operator...); problemType(t, r) != want {
			t.Errorf("%s: %d %s, want %s", q, r.status, r.rawBody, want)
		}
	}
	if r := a.do(t, "GET", "/ops/depositos", ""); r.status != http.StatusForbidden {
		t.Errorf("GET /ops/depositos without operacoes: %d, want 403", r.status)
	}
}

// Every write logs one audit line with the client, the request id and the
// resource ids, and never the token or the body.
func TestWritesAreAudited(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	a := newAPIWithLog(t, slog.New(slog.NewJSONHandler(&buf, nil)))
	// The requests carry the harness's real token; every JWT starts with
	// the base64url of `{"`, "eyJ", which no log line may hold.
	const token = "eyJ"
	key := uuid.NewString()
	requests := []struct {
		path, body string
		headers    []string
		status     int
	}{
		{"/contas", `{"id":"CC-AUD","moeda":"BRL","titular":"ana-titular"}`, []string{headerClient, "ops"}, 201},
		{"/contas/CC-AUD/depositos", `{"valorEmCentavos":987654}`, []string{headerClient, "ops", "Idempotency-Key", key}, 201},
		{"/contas/CC-AUD/depositos", `{"valorEmCentavos":987654}`, []string{headerClient, "bruno", "Idempotency-Key", key}, 422},
	}
	var ids []string
	for _, rq := range requests {
		r := a.do(t, "POST", rq.path, rq.body, rq.headers...)
		if r.status != rq.status {
			t.Fatalf("POST %s: %d %s, want %d", rq.path, r.status, r.rawBody, rq.status)
		}
		ids = append(ids, r.header.Get("X-Request-Id"))
	}
	a.do(t, "GET", "/contas/CC-AUD", "") // reads are not audited

	got := logtest.Audits(t, buf.String())
	want := []map[string]any{
		{"action": "account.open", "client": "ops", "request_id": ids[0], "status": 201.0, "account_id": "CC-AUD", "outcome": "created"},
		{"action": "account.deposit", "client": "ops", "request_id": ids[1], "status": 201.0, "account_id": "CC-AUD", "deposit_id": key},
		{"action": "account.deposit", "client": "bruno", "request_id": ids[2], "status": 422.0, "account_id": "CC-AUD", "deposit_id": key},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit lines mismatch (-want +got):\n%s", diff)
	}
	for _, secret := range []string{token, "ana-titular", "987654"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// An operator's claim of an account opened before ownership is audited as
// a claim, naming the titular it gave; the same request again claims
// nothing and is audited as an open of an existing account.
func TestClaimIsAudited(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	a := newAPIWithLog(t, slog.New(slog.NewJSONHandler(&buf, nil)))
	if _, err := a.db.Exec(context.Background(), `INSERT INTO account (id, currency) VALUES ('CC-OLD', 'BRL')`); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		r := a.do(t, "POST", "/contas", `{"id":"CC-OLD","moeda":"BRL","titular":"ana"}`, operator...)
		if r.status != http.StatusOK || r.body["titular"] != "ana" {
			t.Fatalf("an operator's claim for ana: %d %s, want 200 with titular ana", r.status, r.rawBody)
		}
		ids = append(ids, r.header.Get("X-Request-Id"))
	}
	got := logtest.Audits(t, buf.String())
	want := []map[string]any{
		{"action": "account.claim", "client": "ops", "request_id": ids[0], "status": 200.0, "account_id": "CC-OLD",
			"titular": "ana", "outcome": "claimed"},
		{"action": "account.open", "client": "ops", "request_id": ids[1], "status": 200.0, "account_id": "CC-OLD", "outcome": "existing"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit lines mismatch (-want +got):\n%s", diff)
	}
}

// A deposit's answer carries the balance it left only for the account's
// titular (or an operator): a minting client that does not hold the
// account learns nothing of its balance, not even from a 1-cent deposit or
// a replay.
func TestDepositBalanceOnlyForTheTitular(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	if r := a.do(t, "POST", "/contas", `{"id":"CC-001","moeda":"BRL"}`); r.status != http.StatusCreated {
		t.Fatalf("open: %d %s", r.status, r.rawBody)
	}
	minter := []string{headerClient, "tesouraria", headerScopes, auth.ScopeAccountsDeposit}
	key := uuid.NewString()
	for _, tc := range []struct {
		name    string
		key     string
		headers []string
		want    any // saldoEmCentavos, nil when absent
	}{
		{"the titular", uuid.NewString(), nil, 350.0},
		{"a minting client", key, minter, nil},
		{"its replay", key, minter, nil},
		{"an operator", uuid.NewString(), []string{headerClient, "ops", headerScopes, auth.ScopeAccountsDeposit + " " + auth.ScopeOperations}, 1050.0},
	} {
		r := a.do(t, "POST", "/contas/CC-001/depositos", `{"valorEmCentavos":350}`, append([]string{"Idempotency-Key", tc.key}, tc.headers...)...)
		if r.status != http.StatusCreated {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.rawBody)
		}
		got, shown := r.body["saldoEmCentavos"]
		if tc.want == nil && shown {
			t.Errorf("deposit by %s: the answer shows the balance %v, want no saldoEmCentavos", tc.name, got)
		}
		if tc.want != nil && got != tc.want {
			t.Errorf("deposit by %s: saldoEmCentavos = %v, want %v", tc.name, got, tc.want)
		}
		if r.body["valorEmCentavos"] != 350.0 || r.body["contaId"] != "CC-001" {
			t.Errorf("deposit by %s: %s, want the deposit's amount and account", tc.name, r.rawBody)
		}
	}
}

// TestLedgerErrorsCarryTheirProblems: each error of the ledger's domain,
// wrapped as the store wraps it, is answered through the one writer with
// the status, type, title, detail and fields the API documents
// (docs/api.md, openapi.yaml), the ceilings with the ledger's own types.
func TestLedgerErrorsCarryTheirProblems(t *testing.T) {
	t.Parallel()
	const base = "https://paysuite.dev/problems/"
	amount := func(msg string) []errkind.FieldError {
		return []errkind.FieldError{{Field: "valorEmCentavos", Message: msg}}
	}
	for _, tt := range []struct {
		err  error
		want httpapi.Problem
	}{
		{&validate.ValidationError{Fields: []errkind.FieldError{{Field: "limite", Message: "must be from 1 to 200"}}},
			httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422, Detail: "the request breaks a rule",
				Errors: []errkind.FieldError{{Field: "limite", Message: "must be from 1 to 200"}}}},
		{ledger.ErrAccountNotFound, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "account not found"}},
		{ledger.ErrCurrencyConflict, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "the account exists with another currency"}},
		{ledger.ErrHolderConflict, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "the account exists with another titular"}},
		{ledger.ErrNoTitular, httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409,
			Detail: "the account exists without a titular; only an operator can give it one"}},
		{&ledger.CeilingError{MaxCents: 1000}, httpapi.Problem{Type: base + "deposit-over-ceiling", Title: "Deposit over the ceiling of one deposit",
			Status: 422, Detail: "the deposit is above the ceiling of one deposit", Errors: amount("must be at most 1000")}},
		{&ledger.DailyCeilingError{MaxCents: 10000, Currency: "BRL"}, httpapi.Problem{Type: base + "deposit-over-daily-ceiling",
			Title: "Deposits over the client's daily ceiling", Status: 422,
			Detail: "the deposit would take this client's deposits of BRL today (UTC) over the daily ceiling of 10000 cents; nothing was written"}},
		{ledger.ErrKeyReused, httpapi.Problem{Type: base + "idempotency-key-reused", Title: "Idempotency-Key reused with another payload", Status: 422,
			Detail: "this Idempotency-Key was used for another deposit"}},
		{ledger.ErrFundingAccount, httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422,
			Detail: "funding accounts do not take deposits"}},
		{ledger.ErrBalanceOverflow, httpapi.Problem{Type: base + "validation-failed", Title: "Validation failed", Status: 422,
			Detail: "the deposit would overflow a balance", Errors: amount("too large for this account")}},
		{ledger.ErrNotProcessed, httpapi.Problem{Type: base + "not-found", Title: "Not found", Status: 404, Detail: "the ledger has not processed this transfer"}},
	} {
		rec := httptest.NewRecorder()
		httpapi.WriteError(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/contas/CC-1/depositos", nil),
			slog.New(slog.DiscardHandler), fmt.Errorf("deposit: %w", tt.err))
		var got httpapi.Problem
		err := json.Unmarshal(rec.Body.Bytes(), &got)
		tt.want.Instance = "/contas/CC-1/depositos"
		if diff := cmp.Diff(tt.want, got); err != nil || diff != "" || rec.Code != tt.want.Status {
			t.Errorf("%v: status %d, %v, problem mismatch (-want +got):\n%s", tt.err, rec.Code, err, diff)
		}
	}
}
