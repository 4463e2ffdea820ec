// Package httpapi is the suite's HTTP plumbing shared by every service: the
// one problem+json (RFC 9457) writer with the one table from error kind
// (pkg/errkind) to status, type and title, strict JSON request decoding,
// and the server with its timeouts, panic recovery, request ids, access
// metrics and health routes.
package httpapi

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/outage"
)

// ProblemTypeBase prefixes every problem type URI.
const ProblemTypeBase = "https://paysuite.dev/problems/"

// problems is the one table from a shared error kind to its status and
// title (a service's own kind, errkind.Refine, has the status of the
// shared kind it refines and a title of its own). retryAfter, when set, is
// the Retry-After (seconds) every answer of the kind carries.
var problems = map[errkind.Kind]struct {
	status            int
	title, retryAfter string
}{
	errkind.Malformed:        {http.StatusBadRequest, "Malformed request", ""},
	errkind.InvalidKey:       {http.StatusBadRequest, "Missing or invalid Idempotency-Key", ""},
	errkind.InvalidID:        {http.StatusBadRequest, "Invalid id", ""},
	errkind.Unauthorized:     {http.StatusUnauthorized, "Unauthorized", ""},
	errkind.Forbidden:        {http.StatusForbidden, "Insufficient scope", ""},
	errkind.NotFound:         {http.StatusNotFound, "Not found", ""},
	errkind.MethodNotAllowed: {http.StatusMethodNotAllowed, "Method not allowed", ""},
	errkind.Timeout:          {http.StatusRequestTimeout, "Request timeout", ""},
	errkind.InProgress:       {http.StatusConflict, "Request in progress", "1"},
	errkind.Conflict:         {http.StatusConflict, "Conflict", ""},
	errkind.TooLarge:         {http.StatusRequestEntityTooLarge, "Payload too large", ""},
	errkind.UnsupportedMedia: {http.StatusUnsupportedMediaType, "Unsupported media type", ""},
	errkind.Validation:       {http.StatusUnprocessableEntity, "Validation failed", ""},
	errkind.KeyReused:        {http.StatusUnprocessableEntity, "Idempotency-Key reused with another payload", ""},
	errkind.RateLimited:      {http.StatusTooManyRequests, "Too many requests", ""},
	errkind.Unavailable:      {http.StatusServiceUnavailable, "Service unavailable", RetryAfterSeconds},
	errkind.Overloaded:       {http.StatusServiceUnavailable, "Overloaded", RetryAfterSeconds},
	errkind.Internal:         {http.StatusInternalServerError, "Internal error", ""},
}

// Status returns the HTTP status of kind; 500 for a kind the table does
// not hold.
func Status(kind errkind.Kind) int {
	return cmp.Or(problems[kind.Shared()].status, http.StatusInternalServerError)
}

// TypeURI returns the problem type URI of kind.
func TypeURI(kind errkind.Kind) string { return ProblemTypeBase + kind.Name() }

// Problem is the RFC 9457 body.
type Problem struct {
	Type      string               `json:"type"`
	Title     string               `json:"title"`
	Status    int                  `json:"status"`
	Detail    string               `json:"detail,omitempty"`
	Instance  string               `json:"instance,omitempty"`
	RequestID string               `json:"requestId,omitempty"`
	Errors    []errkind.FieldError `json:"errors,omitempty"`
}

// maxInstanceSize caps the problem's instance (the request path), so that a
// long path is not sent back whole.
const maxInstanceSize = 256

// RetryAfterSeconds is the Retry-After of a 503 whose writer set none
// (an outage): about how long a database failover or restart takes.
const RetryAfterSeconds = "2"

// WriteError writes err as application/problem+json, the one way every
// handler answers an error. An error with a kind anywhere in err's chain
// (errkind.Of) is answered from the table: its kind's status, type and
// title, its detail and fields. An outage of a dependency
// (outage.Unavailable: the database or the broker unreachable) is a 503
// with Retry-After, which tells the client to retry the same request (with
// the same Idempotency-Key); anything else, a kind the table does not
// hold included, is a 500 that tells the client only "internal error".
// Both log the cause with the request id; neither shows it to the client.
// A Retry-After the handler set stays; otherwise the kind's, if any.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := errkind.Of(err)
	switch {
	case e != nil && problems[e.Kind.Shared()].status != 0:
	case e == nil && outage.Unavailable(err):
		log.WarnContext(r.Context(), "dependency unavailable", "err", err, "method", r.Method, "path", r.URL.Path)
		e = &errkind.Error{Kind: errkind.Unavailable, Detail: "a dependency is unavailable; retry the same request later"}
	default:
		log.ErrorContext(r.Context(), "internal error", "err", err, "method", r.Method, "path", r.URL.Path)
		e = &errkind.Error{Kind: errkind.Internal, Detail: "internal error"}
	}
	entry := problems[e.Kind.Shared()]
	p := Problem{
		Type:      TypeURI(e.Kind),
		Title:     cmp.Or(e.Kind.Title(), entry.title),
		Status:    entry.status,
		Detail:    e.Detail,
		Instance:  truncate(r.URL.Path, maxInstanceSize),
		RequestID: RequestIDFrom(r.Context()),
		Errors:    e.Fields,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if entry.retryAfter != "" && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", entry.retryAfter)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p) //nolint:errchkjson // the client went away; nothing to do
}

// WriteJSON writes v as application/json with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) //nolint:errchkjson // the client went away; nothing to do
}
