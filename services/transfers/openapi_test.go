package transfers

import (
	"log/slog"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/openapitest"
)

// router builds the service's router as Run does: the platform router
// (health, readiness, metrics) plus the service's routes.
func router() chi.Router {
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	mount(r, nil, log)
	return r
}

// TestOpenAPIMatchesRouter: every route and method the router serves is in
// the document, and the other way round; every documented path answers an
// undocumented method with a 405 naming the documented ones.
func TestOpenAPIMatchesRouter(t *testing.T) {
	openapitest.CheckRoutes(t, OpenAPI, router())
	openapitest.CheckMethodNotAllowed(t, OpenAPI, router())
	openapitest.CheckStatesRules(t, OpenAPI, "integers only", "no floats", "contaOrigem and contaDestino must differ")
}

// TestOpenAPIStatuses: every status the handlers can return (the table of
// CONTRACTS.md section 1, plus the operational routes) is documented.
func TestOpenAPIStatuses(t *testing.T) {
	want := map[string][]int{
		"POST /transferencias":     {202, 400, 409, 413, 415, 422, 500},
		"GET /transferencias/{id}": {200, 400, 404, 500},
		"GET /openapi.yaml":        {200},
		"GET /healthz":             {200},
		"GET /readyz":              {200, 503},
		"GET /metrics":             {200},
	}
	openapitest.CheckStatuses(t, OpenAPI, want)
}
