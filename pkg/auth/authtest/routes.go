package authtest

import (
	"log/slog"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/httpapi"
)

// CheckServiceRoutes builds a service's router as the platform does
// (httpapi.NewRouter: the health and metrics routes), lets mount add the
// service's own routes, logging to a discarding logger, and fails tb as
// CheckRoutes does when a route is neither public nor scoped.
func CheckServiceRoutes(tb testing.TB, mount func(r chi.Router, log *slog.Logger)) {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil)
	mount(r, log)
	CheckRoutes(tb, r)
}
