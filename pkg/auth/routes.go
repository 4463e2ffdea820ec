package auth

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// Public marks a route of a route table served without a token. Only the
// PublicPaths may carry it: the middleware asks a token of every other
// path whatever its table says.
const Public = "(public)"

// Route is one line of a service's route table: the table both mounts the
// routes and declares the scope each needs, so a route cannot exist
// without a scope (a test walks every router to prove it).
type Route struct {
	Method  string
	Pattern string
	// Scope is the scope the route needs, or several separated by spaces,
	// any one of which grants it (e.g. "transferencias:ler operacoes"), or
	// Public.
	Scope   string
	Handler http.HandlerFunc
}

// Mount adds routes to r, a router whose middleware includes the
// Authenticator's (httpapi.NewRouter through pkg/platform). Each handler
// first checks the principal's scopes: 403 with an insufficient_scope
// challenge when none of the route's scopes was granted.
func Mount(r chi.Router, log *slog.Logger, routes []Route) {
	for _, rt := range routes {
		r.Method(rt.Method, rt.Pattern, &scoped{scope: rt.Scope, next: rt.Handler, log: log})
	}
}

// ScopeOf returns the scope a route handler found by chi.Walk was mounted
// with, and false for a handler not mounted through Mount.
func ScopeOf(h http.Handler) (string, bool) {
	s, ok := h.(*scoped)
	if !ok {
		return "", false
	}
	return s.scope, true
}

// scoped is a route's handler behind its scope check.
type scoped struct {
	scope string
	next  http.Handler
	log   *slog.Logger
}

func (s *scoped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.scope == Public && IsPublic(r.Method, r.URL.Path) {
		s.next.ServeHTTP(w, r)
		return
	}
	p, ok := FromContext(r.Context())
	if !ok {
		// Mounted on a router without the Authenticator: fail closed.
		Unauthenticated(w, r, s.log)
		return
	}
	needed := strings.Fields(s.scope)
	if s.scope == Public || !slices.ContainsFunc(needed, p.Has) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`", error="insufficient_scope", scope="`+s.scope+`"`)
		httpapi.WriteError(w, r, s.log, errkind.Errorf(errkind.Forbidden, "the token does not grant the scope this route needs: %s", s.scope))
		return
	}
	s.next.ServeHTTP(w, r)
}

// Uncovered walks r and returns every route ("METHOD /pattern") that is
// neither public (PublicPaths, GET or HEAD) nor mounted through Mount with
// a scope: each service's test asserts there is none.
func Uncovered(r chi.Routes) ([]string, error) {
	var bad []string
	err := chi.Walk(r, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		if IsPublic(method, route) {
			return nil
		}
		if scope, ok := ScopeOf(h); !ok || strings.TrimSpace(scope) == "" || scope == Public {
			bad = append(bad, method+" "+route)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk routes: %w", err)
	}
	return bad, nil
}
