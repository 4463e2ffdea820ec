package notifications

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/httpapi"
)

// TestEveryRouteHasAScope: every route of the service's router (the
// platform's health and metrics routes and the operator routes) is public
// or declares the scope it needs. platform.Serve also refuses to start
// otherwise.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	auth.Mount(r, log, opsRoutes(nil, nil, broker.Config{}, []string{"t-dlt"}, log))
	authtest.CheckRoutes(t, r)
}
