package authtest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// TestAsHeaderClient: the principal is the header's client with the
// request's scopes, the default client without the header, and none for
// NoClient; WithTokenUnlessNoClient sends the token except for NoClient.
func TestAsHeaderClient(t *testing.T) {
	t.Parallel()
	var got string // what the handler saw: its token, then its principal
	seen := func(_ http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization") + "|"
		if p, ok := auth.FromContext(r.Context()); ok {
			got += p.Subject + " " + strings.Join(p.Scopes, ",")
		}
	}
	mw := authtest.AsHeaderClient("def", func(r *http.Request) []string { return []string{"s:" + r.Method} })
	h := authtest.WithTokenUnlessNoClient(mw(http.HandlerFunc(seen)), "Bearer tok")
	for client, want := range map[string]string{
		"ana":             "Bearer tok|ana s:GET",
		"":                "Bearer tok|def s:GET",
		authtest.NoClient: "|",
	} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		if client != "" {
			req.Header.Set(authtest.HeaderClient, client)
		}
		got = "(not called)"
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got != want {
			t.Errorf("client %q: handler saw %q, want %q", client, got, want)
		}
	}
}
