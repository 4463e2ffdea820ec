package web

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
)

// auditRecord collects the resource ids of one write for its audit line.
type auditRecord struct{ attrs []any }

// resource names the resource the write touched (an id, never a payload).
func (a *auditRecord) resource(key string, id any) { a.attrs = append(a.attrs, key, id) }

// writeHandler is a write route's handler: it gets the caller and the
// audit record to fill.
type writeHandler func(w http.ResponseWriter, r *http.Request, p auth.Principal, a *auditRecord)

// audited serves a write: it answers 401 when the request carries no
// principal (the authentication middleware in front of every route makes
// that impossible in production, so this only guards a route mounted
// without it), and once next has answered it logs one audit line: action,
// client, request id, status and the resource ids next recorded. Never the
// token, never the body.
func (h *Handler) audited(w http.ResponseWriter, r *http.Request, action string, next writeHandler) {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		unauthenticated(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	var a auditRecord
	next(sw, r, p, &a)
	attrs := append([]any{"action", action, "client", p.Subject,
		"request_id", httpapi.RequestIDFrom(r.Context()), "status", sw.code()}, a.attrs...)
	h.log.InfoContext(r.Context(), "audit", slog.Group("audit", attrs...))
}

// unauthenticated writes the 401 problem of a request without a principal,
// with the problem type the authentication middleware uses for a missing
// token.
func unauthenticated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="paysuite"`)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(httpapi.Problem{ //nolint:errchkjson // the client went away; nothing to do
		Type: httpapi.ProblemTypeBase + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
		Detail: "this route needs a bearer token", Instance: r.URL.Path, RequestID: httpapi.RequestIDFrom(r.Context()),
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}
