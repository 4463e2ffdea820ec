package auth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/httpapi"
)

// FuzzAuthorization feeds the Authorization header to the middleware: it
// never panics, answers only 401 (or 403 for a verified token without the
// scope), and never lets a request through whose token a key of the JWKS
// did not sign, as the JOSE library checks on its own. The seed corpus is
// authtest.BadAuthorizations plus testdata/fuzz/FuzzAuthorization; as a plain
// test it runs the seeds.
func FuzzAuthorization(f *testing.F) {
	iss := authtest.New(f)
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, nil, nil, nil, iss.Authenticator(f).Middleware)
	auth.Mount(r, log, []auth.Route{{Method: http.MethodPost, Pattern: "/transferencias", Scope: auth.ScopeTransfersCreate,
		Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }}})
	set := jwk.NewSet()
	for _, k := range iss.PublicKeys() {
		if err := set.AddKey(k); err != nil {
			f.Fatal(err)
		}
	}
	for _, c := range iss.BadAuthorizations(f) {
		f.Add(c.Authorization)
	}
	f.Add(iss.Bearer(f, "client-a", auth.ScopeTransfersCreate))
	f.Add(iss.Bearer(f, "client-a", auth.ScopeAccountsRead))
	f.Add("bearer " + iss.Token(f, "client-a", auth.ScopeTransfersCreate))

	f.Fuzz(func(t *testing.T, authorization string) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/transferencias", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header["Authorization"] = []string{authorization} // as received, unchecked
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusUnauthorized:
			return
		case http.StatusAccepted, http.StatusForbidden:
			// Only a token a key of the JWKS signed gets past the
			// authentication: check with the library alone.
			_, token, _ := strings.Cut(authorization, " ")
			if _, err := jws.Verify([]byte(strings.TrimSpace(token)), jws.WithKeySet(set)); err != nil {
				t.Fatalf("%d for a token no key of the JWKS signed (%v): %q", rec.Code, err, authorization)
			}
		default:
			t.Fatalf("status %d for Authorization %q: %s", rec.Code, authorization, rec.Body)
		}
	})
}
