package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paysuite/payments/pkg/httpapi"
)

// A database that refuses writes because it is a standby (25006), that is
// shutting down (57P01) or not accepting connections yet (57P03) is an
// outage: the client is told 503 with Retry-After and retries the same
// request; any other database error stays a 500.
func TestWriteErrorStandbyIsUnavailable(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		code string
		want int
	}{
		{"25006", http.StatusServiceUnavailable},
		{"57P01", http.StatusServiceUnavailable},
		{"57P03", http.StatusServiceUnavailable},
		{"22P02", http.StatusInternalServerError},
	} {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", nil)
			err := fmt.Errorf("insert transfer: %w", &pgconn.PgError{Code: tt.code, Message: "cannot execute INSERT in a read-only transaction"})
			httpapi.WriteError(rec, req, log, err)
			if rec.Code != tt.want {
				t.Errorf("SQLSTATE %s: status %d, want %d", tt.code, rec.Code, tt.want)
			}
			if got := rec.Header().Get("Retry-After"); (tt.want == http.StatusServiceUnavailable) != (got != "") {
				t.Errorf("SQLSTATE %s: Retry-After %q", tt.code, got)
			}
		})
	}
}
