// Package httpapi is the suite's HTTP plumbing shared by every service: the
// one problem+json (RFC 9457) writer with the one table from error kind to
// status and type, strict JSON request decoding, and the server with its
// timeouts, panic recovery, request ids, access metrics and health routes.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/paysuite/payments/pkg/outage"
)

// ProblemTypeBase prefixes every problem type URI.
const ProblemTypeBase = "https://paysuite.dev/problems/"

// Kind is a kind of error a client can get.
type Kind string

// The error kinds of the suite. Each has one status and one type URI.
const (
	KindMalformed        Kind = "malformed-request"       // 400
	KindInvalidKey       Kind = "invalid-idempotency-key" // 400
	KindInvalidID        Kind = "invalid-id"              // 400
	KindUnauthorized     Kind = "unauthorized"            // 401
	KindForbidden        Kind = "insufficient-scope"      // 403
	KindNotFound         Kind = "not-found"               // 404
	KindMethodNotAllowed Kind = "method-not-allowed"      // 405
	KindTimeout          Kind = "request-timeout"         // 408
	KindInProgress       Kind = "request-in-progress"     // 409
	KindConflict         Kind = "conflict"                // 409
	KindTooLarge         Kind = "payload-too-large"       // 413
	KindUnsupportedMedia Kind = "unsupported-media-type"  // 415
	KindValidation       Kind = "validation-failed"       // 422
	KindKeyReused        Kind = "idempotency-key-reused"  // 422
	KindDepositCeiling   Kind = "deposit-over-ceiling"    // 422
	// KindDepositDailyCeiling: a client's deposits of the day would pass
	// the ledger's daily minting ceiling.
	KindDepositDailyCeiling Kind = "deposit-over-daily-ceiling" // 422
	KindRateLimited         Kind = "rate-limited"               // 429
	KindUnavailable         Kind = "service-unavailable"        // 503
	KindOverloaded          Kind = "overloaded"                 // 503
	KindInternal            Kind = "internal-error"             // 500
)

// kinds is the one table from error kind to status and title.
var kinds = map[Kind]struct {
	status int
	title  string
}{
	KindMalformed:           {http.StatusBadRequest, "Malformed request"},
	KindInvalidKey:          {http.StatusBadRequest, "Missing or invalid Idempotency-Key"},
	KindInvalidID:           {http.StatusBadRequest, "Invalid id"},
	KindUnauthorized:        {http.StatusUnauthorized, "Unauthorized"},
	KindForbidden:           {http.StatusForbidden, "Insufficient scope"},
	KindNotFound:            {http.StatusNotFound, "Not found"},
	KindMethodNotAllowed:    {http.StatusMethodNotAllowed, "Method not allowed"},
	KindTimeout:             {http.StatusRequestTimeout, "Request timeout"},
	KindInProgress:          {http.StatusConflict, "Request in progress"},
	KindConflict:            {http.StatusConflict, "Conflict"},
	KindTooLarge:            {http.StatusRequestEntityTooLarge, "Payload too large"},
	KindUnsupportedMedia:    {http.StatusUnsupportedMediaType, "Unsupported media type"},
	KindValidation:          {http.StatusUnprocessableEntity, "Validation failed"},
	KindKeyReused:           {http.StatusUnprocessableEntity, "Idempotency-Key reused with another payload"},
	KindDepositCeiling:      {http.StatusUnprocessableEntity, "Deposit over the ceiling of one deposit"},
	KindDepositDailyCeiling: {http.StatusUnprocessableEntity, "Deposits over the client's daily ceiling"},
	KindRateLimited:         {http.StatusTooManyRequests, "Too many requests"},
	KindUnavailable:         {http.StatusServiceUnavailable, "Service unavailable"},
	KindOverloaded:          {http.StatusServiceUnavailable, "Overloaded"},
	KindInternal:            {http.StatusInternalServerError, "Internal error"},
}

// Status returns the HTTP status of kind.
func (k Kind) Status() int {
	if e, ok := kinds[k]; ok {
		return e.status
	}
	return http.StatusInternalServerError
}

// TypeURI returns the problem type URI of kind.
func (k Kind) TypeURI() string { return ProblemTypeBase + string(k) }

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error with a kind, a detail for the client and, for
// validation, the invalid fields.
type Error struct {
	Kind   Kind
	Detail string
	Fields []FieldError
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Kind, e.Detail)
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return fmt.Sprintf("%s: %s (%s)", e.Kind, e.Detail, strings.Join(parts, "; "))
}

// Errorf returns an *Error of kind with a formatted detail.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Problem is the RFC 9457 body.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Instance  string       `json:"instance,omitempty"`
	RequestID string       `json:"requestId,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
}

// maxInstanceSize caps the problem's instance (the request path), so that a
// long path is not sent back whole.
const maxInstanceSize = 256

// RetryAfterSeconds is the Retry-After of a 503 whose writer set none
// (an outage): about how long a database failover or restart takes.
const RetryAfterSeconds = "2"

// WriteError writes err as application/problem+json. An *Error anywhere in
// err's chain gives its kind; an outage of a dependency (outage.Unavailable:
// the database or the broker unreachable) is a 503 with Retry-After, which
// tells the client to retry the same request (with the same
// Idempotency-Key); anything else is a 500 that tells the client only
// "internal error". Both log the cause with the request id; neither shows
// it to the client.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case outage.Unavailable(err):
		log.WarnContext(r.Context(), "dependency unavailable", "err", err, "method", r.Method, "path", r.URL.Path)
		e = &Error{Kind: KindUnavailable, Detail: "a dependency is unavailable; retry the same request later"}
	default:
		log.ErrorContext(r.Context(), "internal error", "err", err, "method", r.Method, "path", r.URL.Path)
		e = &Error{Kind: KindInternal, Detail: "internal error"}
	}
	entry, ok := kinds[e.Kind]
	if !ok {
		entry = kinds[KindInternal]
	}
	p := Problem{
		Type:      e.Kind.TypeURI(),
		Title:     entry.title,
		Status:    entry.status,
		Detail:    e.Detail,
		Instance:  truncate(r.URL.Path, maxInstanceSize),
		RequestID: RequestIDFrom(r.Context()),
		Errors:    e.Fields,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if p.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", RetryAfterSeconds)
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
