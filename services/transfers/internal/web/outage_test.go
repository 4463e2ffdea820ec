package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/netfault"
)

// With its database unreachable, the API answers 503 with Retry-After (a
// problem that tells the client to retry the same request), never 500, and
// shows nothing of the driver's error; once the database is back, the same
// request succeeds.
func TestDatabaseOutageAnswers503WithRetryAfter(t *testing.T) {
	t.Parallel()
	dsn, proxy := netfault.PostgresURL(t, transfersDSN(t))
	pool, store := openStore(t, dsn, func(c *pgxpool.Config) { c.ConnConfig.ConnectTimeout = time.Second })
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(authedRouter(t, log, web.New(transfer.NewService(store, testTopics, testKey), log, testSpec).Mount))
	t.Cleanup(srv.Close)
	h := &harness{url: srv.URL, pool: pool}

	existing := uuid.NewString()
	if res := h.post(t, existing, validBody); res.status != http.StatusAccepted {
		t.Fatalf("POST before the outage: %d %s", res.status, res.body)
	}
	proxy.Cut()
	key := uuid.NewString()
	for _, tc := range []struct {
		name string
		do   func() response
	}{
		{"POST", func() response { return h.post(t, key, validBody) }},
		{"GET", func() response { return do(t, http.MethodGet, h.url+"/transferencias/"+existing, nil, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.do()
			if res.status != http.StatusServiceUnavailable {
				t.Fatalf("status = %d, want 503 (body %s)", res.status, res.body)
			}
			if got := res.header.Get("Retry-After"); got == "" {
				t.Errorf("no Retry-After header")
			}
			p := res.problem(t)
			if p.Type != httpapi.TypeURI(errkind.Unavailable) {
				t.Errorf("problem type = %q, want %q", p.Type, httpapi.TypeURI(errkind.Unavailable))
			}
			for _, leak := range []string{proxy.Addr(), "127.0.0.1", "dial", "connect", "postgres"} {
				if strings.Contains(string(res.body), leak) {
					t.Errorf("body shows %q: %s", leak, res.body)
				}
			}
		})
	}
	proxy.Restore()
	if res := h.post(t, key, validBody); res.status != http.StatusAccepted {
		t.Fatalf("POST with the same key after the outage: %d %s", res.status, res.body)
	}
}
