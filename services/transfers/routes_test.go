package transfers

import (
	"testing"

	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestEveryRouteHasAScope: every route of the service is public or
// declares the scope it needs.
func TestEveryRouteHasAScope(t *testing.T) {
	t.Parallel()
	authtest.CheckRoutes(t, router())
}
