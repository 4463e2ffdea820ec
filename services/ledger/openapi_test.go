package ledger

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/support/openapitest"
)

// router builds the service's router as Run does: the platform router
// (health, readiness, metrics) plus the service's routes.
func router() chi.Router {
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	mount(r, nil, opsRoutes(nil, nil, broker.Config{}, nil, log), log)
	return r
}

// TestOpenAPIMatchesRouter: every route and method the router serves is in
// the document, and the other way round; every documented path answers an
// undocumented method with a 405 naming the documented ones; the document
// states the rules a schema cannot.
func TestOpenAPIMatchesRouter(t *testing.T) {
	openapitest.CheckRoutes(t, OpenAPI, router())
	openapitest.CheckMethodNotAllowed(t, OpenAPI, router())
	openapitest.CheckStatesRules(t, OpenAPI, "amounts are integers", "a number with a fraction or a string is 400", "contaOrigem and contaDestino must differ")
}

// TestOpenAPIStatuses: every status the handlers can return (CONTRACTS.md
// sections 2 and 8, plus the operational routes) is documented.
func TestOpenAPIStatuses(t *testing.T) {
	openapitest.CheckStatuses(t, OpenAPI, map[string][]int{
		"POST /contas":                 {200, 201, 400, 401, 403, 408, 409, 413, 415, 422, 429, 500},
		"GET /contas/{id}":             {200, 401, 403, 404, 429, 500},
		"POST /contas/{id}/depositos":  {201, 400, 401, 403, 404, 408, 413, 415, 422, 429, 500},
		"GET /contas/{id}/lancamentos": {200, 400, 401, 403, 404, 422, 429, 500},
		"GET /contas/{id}/saldo":       {200, 400, 401, 403, 404, 429, 500},
		"GET /contas/{id}/extrato":     {200, 400, 401, 403, 404, 422, 429, 500},
		"GET /ops/depositos":           {200, 400, 401, 403, 422, 429, 500},
		"GET /openapi.yaml":            {200},
		"GET /healthz":                 {200},
		"GET /readyz":                  {200, 503},
		"GET /metrics":                 {200},
	})
}

// TestOpenAPIServed: GET /openapi.yaml serves the embedded document.
func TestOpenAPIServed(t *testing.T) {
	rec := httptest.NewRecorder()
	router().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" || rec.Body.String() != string(OpenAPI) {
		t.Fatalf("GET /openapi.yaml = %d %q, %d bytes; want 200 application/yaml with the document",
			rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
	openapitest.Parse(t, rec.Body.Bytes())
}
