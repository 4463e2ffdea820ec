package auth

import "net/http"

// BearerToken returns the bearer token of r, which the middleware has
// verified when r reached a route behind it, and whether r carries one. A
// service forwards it, and nothing else, to call another service as the
// same caller (the transfers service reads the ledger's record of a
// transfer as the operator who applies a held result): no credential of
// its own is stored, and the callee checks the caller's scope itself.
func BearerToken(r *http.Request) (string, bool) {
	token, err := bearer(r)
	return token, err == nil && token != ""
}
