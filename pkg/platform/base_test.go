package platform_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/platform"
)

// TestRunRefusesUnscopedRoutes: a service whose router has a route that is
// neither public nor mounted with a scope does not start.
func TestRunRefusesUnscopedRoutes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := openBase(t, authtest.New(t), 0)
	b.router.Post("/contas", func(http.ResponseWriter, *http.Request) {})
	err := b.run(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "routes without a scope [POST /contas]") {
		t.Errorf("Run = %v, want a refusal naming POST /contas", err)
	}
}

// Serve refuses parts it cannot run, naming what is missing, rather than
// failing later on a nil part.
func TestServeRefusesMissingParts(t *testing.T) {
	t.Parallel()
	cfg := platform.Config{Service: "transfers", HTTPAddr: "127.0.0.1:0"}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		cfg   platform.Config
		parts platform.Parts
		want  string
	}{
		{"no router", cfg, platform.Parts{}, "Serve needs a router and a readiness probe"},
		{"no readiness", cfg, platform.Parts{Router: chi.NewRouter()}, "Serve needs a router and a readiness probe"},
		{"no relay", cfg, platform.Parts{Router: chi.NewRouter(), Readiness: &platform.Readiness{}}, "Serve needs the relay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := platform.Serve(context.Background(), tc.cfg, log, nil, tc.parts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Serve = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
