package transfers

import (
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/paysuite/payments/pkg/httpapi"
)

// document is the part of an OpenAPI document the tests read.
type document struct {
	OpenAPI string `yaml:"openapi"`
	Paths   map[string]map[string]struct {
		Responses map[string]any `yaml:"responses"`
	} `yaml:"paths"`
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
	mount(r, nil, log)
	return r
}

// TestOpenAPIMatchesRouter: every route and method the router serves is in
// the document, and the other way round.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := parseOpenAPI(t)
	var served []string
	err := chi.Walk(router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("routes served (-) and documented (+) differ:\n%s", diff)
	}
}

// TestOpenAPIStatuses: every status the handlers can return (the table of
// CONTRACTS.md section 1, plus the operational routes) is documented.
func TestOpenAPIStatuses(t *testing.T) {
	doc := parseOpenAPI(t)
	want := map[string][]int{
		"POST /transferencias":     {202, 400, 409, 413, 415, 422, 500, 503},
		"GET /transferencias/{id}": {200, 400, 404, 500, 503},
		"GET /openapi.yaml":        {200},
		"GET /healthz":             {200},
		"GET /readyz":              {200, 503},
		"GET /metrics":             {200},
	}
	for op, statuses := range want {
		method, path, _ := strings.Cut(op, " ")
		o, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("%s is not documented", op)
			continue
		}
		var got []int
		for code := range o.Responses {
			n, err := strconv.Atoi(code)
			if err != nil {
				t.Errorf("%s: response %q is not a status code", op, code)
				continue
			}
			got = append(got, n)
		}
		slices.Sort(got)
		if diff := cmp.Diff(statuses, got); diff != "" {
			t.Errorf("%s: statuses mismatch (-contract +documented):\n%s", op, diff)
		}
	}
}
