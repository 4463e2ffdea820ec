package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// A request whose database call does not return (here pg_sleep; in
// production a commit waiting for a stopped synchronous standby, or a
// server that hangs) is answered 503 with Retry-After once the request
// deadline passes, not left hanging; without Deadline the same request
// takes the whole of the call.
func TestDeadlineAnswersAStuckDatabaseCall503(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(context.Background(), pgtest.NewDSN(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	log := slog.New(slog.DiscardHandler)
	stuck := func(w http.ResponseWriter, r *http.Request) {
		if _, err := db.Exec(r.Context(), `SELECT pg_sleep(3)`); err != nil {
			httpapi.WriteError(w, r, log, fmt.Errorf("stuck query: %w", err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	for _, tc := range []struct {
		name       string
		deadline   time.Duration
		wantStatus int
		within     time.Duration
	}{
		{"with a deadline", 300 * time.Millisecond, http.StatusServiceUnavailable, 2 * time.Second},
		{"without", 0, http.StatusNoContent, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httpapi.NewRouter(log, nil, nil, nil, httpapi.Deadline(tc.deadline))
			r.Post("/stuck", stuck)
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			began := time.Now()
			res, err := http.Post(srv.URL+"/stuck", "application/json", nil) //nolint:noctx // the server's deadline is under test
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			took := time.Since(began)
			if res.StatusCode != tc.wantStatus || took > tc.within {
				t.Fatalf("answered %d after %v; want %d within %v", res.StatusCode, took.Round(time.Millisecond), tc.wantStatus, tc.within)
			}
			if tc.wantStatus == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
				t.Error("a 503 without Retry-After")
			}
		})
	}
}
