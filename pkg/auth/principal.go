// Package auth is the suite's one authentication and authorization layer
// (CONTRACTS.md section 8): bearer tokens verified against a JWKS, scopes
// per route, and the principal of a request carried in its context.
package auth

import (
	"context"
	"slices"
)

// Scopes of CONTRACTS.md section 8.
const (
	ScopeTransfersCreate = "transferencias:criar"
	ScopeTransfersRead   = "transferencias:ler"
	// ScopeTransfersRefund refunds transfers paid into the client's
	// accounts (CONTRACTS.md section 10).
	ScopeTransfersRefund = "transferencias:estornar"
	ScopeAccountsAdmin   = "contas:admin"
	ScopeAccountsDeposit = "contas:depositar"
	ScopeAccountsRead    = "contas:ler"
	ScopeOperations      = "operacoes"
)

// Principal is the authenticated caller of a request: the token's subject
// (the client id) and its scopes.
type Principal struct {
	// Subject is the token's sub claim: the client.
	Subject string
	// Scopes is the token's scope claim, split on spaces.
	Scopes []string
}

// Has reports whether p was granted scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Operator reports whether p holds the operacoes scope, which sees every
// client's resources.
func (p Principal) Operator() bool { return p.Has(ScopeOperations) }

type ctxKey struct{}

// WithPrincipal returns ctx carrying p. The authentication middleware calls
// it once a token is verified; nothing else in production should.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal of ctx and whether there is one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}
