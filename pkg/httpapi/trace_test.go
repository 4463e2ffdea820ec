package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/support/spantest"
)

// TestServerSpans checks the router's server span of each request: named
// after the method and chi's route pattern (never the path; the method
// alone when no route matched, OTHER for an unknown method), continuing
// the caller's traceparent, with the status code and an error status for
// a 5xx. Not parallel: it installs a global tracer provider.
func TestServerSpans(t *testing.T) {
	rec := spantest.Record(t)

	// A middleware that hands on a copy of the request, as the
	// authentication middleware does: the span is still renamed after the
	// route.
	type key struct{}
	copying := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, true)))
		})
	}
	r := httpapi.NewRouter(slog.New(slog.DiscardHandler), nil, nil, nil, copying)
	r.Get("/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	r.Get("/broken", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })

	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	type got struct {
		Name   string
		Kind   trace.SpanKind
		Status int64
		Route  string
		Error  bool
		Parent string
		Trace  string
	}
	tests := []struct {
		method, path, traceparent string
		want                      got
	}{
		{"GET", "/things/42", client, got{Name: "GET /things/{id}", Kind: trace.SpanKindServer, Status: 204,
			Route: "/things/{id}", Parent: "00f067aa0ba902b7", Trace: "4bf92f3577b34da6a3ce929d0e0e4736"}},
		{"GET", "/broken", "", got{Name: "GET /broken", Kind: trace.SpanKindServer, Status: 502, Route: "/broken", Error: true}},
		{"GET", "/nowhere/42", "", got{Name: "GET", Kind: trace.SpanKindServer, Status: 404}},
		{"BREW", "/nowhere", "", got{Name: "OTHER", Kind: trace.SpanKindServer, Status: 404}},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			before := len(rec.Ended())
			req := httptest.NewRequestWithContext(context.Background(), tc.method, tc.path, nil)
			if tc.traceparent != "" {
				req.Header.Set("traceparent", tc.traceparent)
			}
			r.ServeHTTP(httptest.NewRecorder(), req)
			spans := rec.Ended()[before:]
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			s := spans[0]
			g := got{Name: s.Name(), Kind: s.SpanKind(), Error: s.Status().Code == codes.Error}
			for _, kv := range s.Attributes() {
				switch kv.Key {
				case attribute.Key("http.response.status_code"):
					g.Status = kv.Value.AsInt64()
				case attribute.Key("http.route"):
					g.Route = kv.Value.AsString()
				}
			}
			if tc.traceparent != "" {
				g.Parent, g.Trace = s.Parent().SpanID().String(), s.SpanContext().TraceID().String()
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("span mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
