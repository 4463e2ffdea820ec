package ledger

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/ledger/internal/web"
)

// TestEveryRouteHasAScope: every route of the service, built as Run
// builds it, is public or declares the scope it needs.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	web.New(nil, log).Routes(r)
	authtest.CheckRoutes(t, r)
}
