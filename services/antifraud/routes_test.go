package antifraud

import (
	"log/slog"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestEveryRouteHasAScope: every route of the service's router (the
// platform's health and metrics routes and the operator routes) is public
// or declares the scope it needs. platform.Serve also refuses to start
// otherwise.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	authtest.CheckServiceRoutes(t, func(r chi.Router, log *slog.Logger) { auth.Mount(r, log, opsRoutes(nil, nil, log)) })
}
