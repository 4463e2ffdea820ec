package httpapi_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// overloaded is a 503 of its own type, distinct from an outage's, and
// keeps the Retry-After its writer sized; an outage's 503 gets the fixed
// one.
func TestOverloadedIsDistinctFromAnOutage(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	write := func(retry string, err error) (*httptest.ResponseRecorder, httpapi.Problem) {
		w := httptest.NewRecorder()
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		httpapi.WriteError(w, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", nil), log, err)
		var p httpapi.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		return w, p
	}
	w, p := write("7", errkind.Errorf(errkind.Overloaded, "behind"))
	if w.Code != http.StatusServiceUnavailable || p.Type != "https://paysuite.dev/problems/overloaded" || w.Header().Get("Retry-After") != "7" {
		t.Errorf("overloaded: %d %+v Retry-After %q; want 503, type .../overloaded, Retry-After 7", w.Code, p, w.Header().Get("Retry-After"))
	}
	w, p = write("", fmt.Errorf("insert: %w", syscall.ECONNREFUSED))
	if w.Code != http.StatusServiceUnavailable || p.Type != "https://paysuite.dev/problems/service-unavailable" || w.Header().Get("Retry-After") != httpapi.RetryAfterSeconds {
		t.Errorf("outage: %d %+v Retry-After %q", w.Code, p, w.Header().Get("Retry-After"))
	}
}
