package auth

import (
	"log/slog"
	"net/http"

	"github.com/felixge/httpsnoop"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// AuditRecord collects the resource ids of one write for its audit line.
type AuditRecord struct {
	attrs  []any
	action string
}

// Action names the write as it turned out to be, in place of the route's
// action (an account open that was a claim is audited as a claim).
func (a *AuditRecord) Action(name string) { a.action = name }

// Resource names a resource the write touched (an id, never a payload).
func (a *AuditRecord) Resource(key string, id any) { a.attrs = append(a.attrs, key, id) }

// WriteHandler is a write route's handler: it gets the caller and the
// audit record to fill.
type WriteHandler func(w http.ResponseWriter, r *http.Request, p Principal, a *AuditRecord)

// Audited returns the handler of a write route, the one way every service
// audits its writes (CONTRACTS.md section 8): once next has answered, it
// logs one "audit" line with the action, the client, the request id, the
// status and the resource ids next recorded; never the token, never the
// body. A request without a principal is answered 401 (the middleware in
// front of every route makes that impossible in production; this guards a
// route mounted without it).
func Audited(log *slog.Logger, action string, next WriteHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := FromContext(r.Context())
		if !ok {
			Unauthenticated(w, r, log)
			return
		}
		a := AuditRecord{action: action}
		// The status is 200 when next wrote nothing or a body without one.
		cm := httpsnoop.CaptureMetricsFn(w, func(w http.ResponseWriter) { next(w, r, p, &a) })
		attrs := append([]any{"action", a.action, "client", p.Subject,
			"request_id", httpapi.RequestIDFrom(r.Context()), "status", cm.Code}, a.attrs...)
		log.InfoContext(r.Context(), "audit", slog.Group("audit", attrs...))
	}
}

// Unauthenticated writes the 401 problem of a request without a principal,
// the one the middleware writes for a missing token.
func Unauthenticated(w http.ResponseWriter, r *http.Request, log *slog.Logger) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`"`)
	httpapi.WriteError(w, r, log, errkind.Errorf(errkind.Unauthorized, "a bearer token is required (Authorization: Bearer <token>)"))
}
