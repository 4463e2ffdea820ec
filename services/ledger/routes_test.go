package ledger

import (
	"log/slog"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/services/ledger/internal/web"
)

// TestEveryRouteHasAScope: every route of the service, built as Run
// builds it, is public or declares the scope it needs.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	authtest.CheckServiceRoutes(t, func(r chi.Router, log *slog.Logger) { web.New(nil, log).Routes(r) })
}
