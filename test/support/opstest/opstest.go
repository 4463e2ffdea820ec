// Package opstest serves a service's operator routes (/ops/...) to a test
// the way an authenticated operator reaches them, on a fresh database of
// that service: the set-up every service's opsweb tests share.
package opstest

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// DB opens a fresh database with service's migrations applied, through
// pkg/postgres as the service opens its own, closed when the test ends.
func DB(tb testing.TB, service string) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(tb.Context(), pgtest.NewDSN(tb, migrations.ForService(service)...), 4)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	return db
}

// Server is a set of routes mounted as the service mounts them, each
// request made by the operator "ana" with the operations scope.
type Server struct {
	tb testing.TB
	h  http.Handler
}

// Serve mounts routes with auth.Mount, logging to log (discarded when nil).
func Serve(tb testing.TB, log *slog.Logger, routes []auth.Route) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			op := auth.Principal{Subject: "ana", Scopes: []string{auth.ScopeOperations}}
			next.ServeHTTP(w, req.WithContext(auth.WithPrincipal(req.Context(), op)))
		})
	})
	auth.Mount(r, log, routes)
	return &Server{tb: tb, h: r}
}

// Call sends a request without a body and returns its status; on 200 it
// decodes the JSON body into out, unless out is nil.
func (s *Server) Call(method, path string, out any) int {
	s.tb.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequestWithContext(s.tb.Context(), method, path, nil))
	if out != nil && rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			s.tb.Fatalf("%s %s: decode %q: %v", method, path, rec.Body.String(), err)
		}
	}
	return rec.Code
}

// Get is Call with GET.
func (s *Server) Get(path string, out any) int {
	s.tb.Helper()
	return s.Call(http.MethodGet, path, out)
}
