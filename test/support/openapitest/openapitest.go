// Package openapitest checks a service's OpenAPI document against its
// router, the same way for every service: the routes served and the
// operations documented are the same set, each operation documents the
// statuses its handlers can return, and every documented path answers an
// undocumented method with a 405 problem whose Allow header names the
// documented ones.
package openapitest

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// Document is the part of an OpenAPI document the checks read.
type Document struct {
	OpenAPI string `yaml:"openapi"`
	Info    struct {
		Description string `yaml:"description"`
	} `yaml:"info"`
	Paths map[string]map[string]struct {
		Responses map[string]any `yaml:"responses"`
	} `yaml:"paths"`
}

// Parse reads an OpenAPI 3.1 document.
func Parse(tb testing.TB, doc []byte) Document {
	tb.Helper()
	var d Document
	if err := yaml.Unmarshal(doc, &d); err != nil {
		tb.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(d.OpenAPI, "3.1.") {
		tb.Fatalf("openapi = %q, want 3.1.x", d.OpenAPI)
	}
	return d
}

// CheckRoutes fails tb unless every route and method router serves is in
// doc, and every operation of doc is served.
func CheckRoutes(tb testing.TB, doc []byte, router chi.Routes) {
	tb.Helper()
	d := Parse(tb, doc)
	var served []string
	err := chi.Walk(router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	var documented []string
	for path, ops := range d.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if diff := cmp.Diff(served, documented); diff != "" {
		tb.Errorf("routes served (-) and documented (+) differ:\n%s", diff)
	}
}

// CheckStatuses fails tb unless each operation of want ("POST /path")
// documents exactly the statuses listed.
func CheckStatuses(tb testing.TB, doc []byte, want map[string][]int) {
	tb.Helper()
	d := Parse(tb, doc)
	for op, statuses := range want {
		method, path, _ := strings.Cut(op, " ")
		o, ok := d.Paths[path][strings.ToLower(method)]
		if !ok {
			tb.Errorf("%s is not documented", op)
			continue
		}
		var got []int
		for code := range o.Responses {
			n, err := strconv.Atoi(code)
			if err != nil {
				tb.Errorf("%s: response %q is not a status code", op, code)
				continue
			}
			got = append(got, n)
		}
		slices.Sort(got)
		if diff := cmp.Diff(statuses, got); diff != "" {
			tb.Errorf("%s: statuses mismatch (-contract +documented):\n%s", op, diff)
		}
	}
}

var param = regexp.MustCompile(`\{[^}]+\}`)

// CheckMethodNotAllowed sends every documented path a method it does not
// document and fails tb unless the answer is a 405 problem whose Allow
// header lists the documented methods (and HEAD wherever GET is).
func CheckMethodNotAllowed(tb testing.TB, doc []byte, router http.Handler) {
	tb.Helper()
	d := Parse(tb, doc)
	for path, ops := range d.Paths {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
			http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			_, documented := ops[strings.ToLower(m)]
			_, get := ops["get"]
			if documented || (m == http.MethodHead && get) {
				allow = append(allow, m)
			}
		}
		for _, m := range []string{http.MethodPut, http.MethodDelete, "BREW"} {
			if slices.Contains(allow, m) {
				continue
			}
			target := param.ReplaceAllString(path, "x")
			req := httptest.NewRequestWithContext(tb.Context(), m, target, nil)
			rec := httptest.NewRecorder()
			router.ServeHTTP(rec, req)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Content-Type") != "application/problem+json" {
				tb.Errorf("%s %s = %d %q, want a 405 problem", m, target, rec.Code, rec.Header().Get("Content-Type"))
			}
			if got, want := rec.Header().Get("Allow"), strings.Join(allow, ", "); got != want {
				tb.Errorf("%s %s: Allow = %q, want %q", m, target, got, want)
			}
		}
	}
}

// CheckStatesRules fails tb unless the document's description states each
// of rules (the rules a schema cannot say), matched case-insensitively
// with line breaks read as spaces.
func CheckStatesRules(tb testing.TB, doc []byte, rules ...string) {
	tb.Helper()
	d := Parse(tb, doc)
	desc := strings.ToLower(strings.Join(strings.Fields(d.Info.Description), " "))
	for _, r := range rules {
		if !strings.Contains(desc, strings.ToLower(r)) {
			tb.Errorf("the document's description does not state %q", r)
		}
	}
}
