package transfers

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/support/openapitest"
)

// document is the part of an OpenAPI document the tests read.
type document struct {
	OpenAPI  string                `yaml:"openapi"`
	Security []map[string][]string `yaml:"security"`
	Paths    map[string]map[string]struct {
		Responses map[string]any         `yaml:"responses"`
		Security  *[]map[string][]string `yaml:"security"`
	} `yaml:"paths"`
	Components struct {
		SecuritySchemes map[string]struct {
			Type   string `yaml:"type"`
			Scheme string `yaml:"scheme"`
		} `yaml:"securitySchemes"`
	} `yaml:"components"`
}

func parseOpenAPI(t *testing.T) document {
	t.Helper()
	var doc document
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	return doc
}

// router builds the service's router as Run does: the platform router
// (health, readiness, metrics) plus the service's routes.
func router() chi.Router {
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	mount(r, nil, nil, nil, nil, opsRoutes(nil, nil, nil, log), log)
	return r
}

// TestOpenAPIMatchesRouter: every route and method the router serves is in
// the document, and the other way round; every documented path answers an
// undocumented method with a 405 naming the documented ones.
func TestOpenAPIMatchesRouter(t *testing.T) {
	openapitest.CheckRoutes(t, OpenAPI, router())
	openapitest.CheckMethodNotAllowed(t, OpenAPI, router())
	openapitest.CheckStatesRules(t, OpenAPI, "amounts are integers", "a number with a fraction or a string is 400", "contaOrigem and contaDestino must differ")
}

// TestOpenAPIStatuses: every status the handlers can return (the table of
// CONTRACTS.md section 1, plus the operational routes) is documented.
func TestOpenAPIStatuses(t *testing.T) {
	want := map[string][]int{
		"POST /transferencias":                          {202, 400, 401, 403, 408, 409, 413, 415, 422, 429, 500, 503},
		"GET /transferencias/{id}":                      {200, 400, 401, 403, 404, 429, 500, 503},
		"POST /transferencias/{id}/captura":             {202, 400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 500, 503},
		"POST /transferencias/{id}/cancelamento":        {202, 400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 500, 503},
		"POST /transferencias/{id}/estornos":            {202, 400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 500, 503},
		"GET /transferencias/{id}/estornos/{estornoId}": {200, 400, 401, 403, 404, 429, 500, 503},
		"GET /openapi.yaml":                             {200},
		"GET /healthz":                                  {200},
		"GET /readyz":                                   {200, 503},
		"GET /metrics":                                  {200},
		"GET /transferencias":                           {200, 400, 401, 403, 429, 500, 503},
	}
	openapitest.CheckStatuses(t, OpenAPI, want)
}

// TestOpenAPISecurity: the document requires the bearer scheme everywhere
// but on the routes the middleware serves without a token, which say
// security: [] (and only those).
func TestOpenAPISecurity(t *testing.T) {
	doc := parseOpenAPI(t)
	if s := doc.Components.SecuritySchemes["bearerAuth"]; s.Type != "http" || s.Scheme != "bearer" {
		t.Errorf("securitySchemes.bearerAuth = %+v, want http bearer", s)
	}
	if diff := cmp.Diff([]map[string][]string{{"bearerAuth": {}}}, doc.Security); diff != "" {
		t.Errorf("top-level security mismatch (-want +got):\n%s", diff)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			public := auth.IsPublic(strings.ToUpper(method), path)
			documentedPublic := op.Security != nil && len(*op.Security) == 0
			if public != documentedPublic {
				t.Errorf("%s %s: served without a token %v, documented without one %v", method, path, public, documentedPublic)
			}
		}
	}
}
