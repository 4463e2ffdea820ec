package authtest

import (
	"net/http"

	"github.com/paysuite/payments/pkg/auth"
)

// Test-only principals from request headers, for handler tests that act as
// many clients without a token for each.
const (
	// HeaderClient names the client a test request acts as.
	HeaderClient = "X-Test-Client"
	// NoClient as the HeaderClient value sends the request without a
	// principal and, through WithTokenUnlessNoClient, without a token.
	NoClient = "-"
)

// AsHeaderClient is test-only middleware that puts into each request's
// context the principal its headers name, as the authentication middleware
// does with a verified token: the client of HeaderClient (def when the
// header is absent) with the scopes scopes gives for the request; no
// principal at all for NoClient.
func AsHeaderClient(def string, scopes func(*http.Request) []string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			client := r.Header.Get(HeaderClient)
			switch client {
			case NoClient:
				next.ServeHTTP(w, r)
				return
			case "":
				client = def
			}
			p := auth.Principal{Subject: client, Scopes: scopes(r)}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}

// WithTokenUnlessNoClient is WithToken(h, bearer), except that a request
// whose HeaderClient is NoClient goes without a token (and so meets the
// authentication middleware's 401).
func WithTokenUnlessNoClient(h http.Handler, bearer string) http.Handler {
	withToken := WithToken(h, bearer)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderClient) == NoClient {
			h.ServeHTTP(w, r)
			return
		}
		withToken.ServeHTTP(w, r)
	})
}
