// Package errkind gives an error the kind its client is told, with nothing
// of HTTP (benbjohnson/wtf's Error.Code): domains import it, and
// pkg/httpapi's one table turns a kind into a status, a type and a title.
package errkind

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is a kind of error a client can get; its name is the last segment
// of its problem type. The zero Kind is an internal error.
type Kind struct {
	name  string
	base  string // the shared kind a service's own kind refines; empty for a shared kind
	title string // a service's own kind's title
}

// The kinds every service shares; pkg/httpapi's table gives each its
// status and title.
var (
	Malformed        = Kind{name: "malformed-request"}
	InvalidKey       = Kind{name: "invalid-idempotency-key"}
	InvalidID        = Kind{name: "invalid-id"}
	Unauthorized     = Kind{name: "unauthorized"}
	Forbidden        = Kind{name: "insufficient-scope"}
	NotFound         = Kind{name: "not-found"}
	MethodNotAllowed = Kind{name: "method-not-allowed"}
	Timeout          = Kind{name: "request-timeout"}
	InProgress       = Kind{name: "request-in-progress"}
	Conflict         = Kind{name: "conflict"}
	TooLarge         = Kind{name: "payload-too-large"}
	UnsupportedMedia = Kind{name: "unsupported-media-type"}
	Validation       = Kind{name: "validation-failed"}
	KeyReused        = Kind{name: "idempotency-key-reused"}
	RateLimited      = Kind{name: "rate-limited"}
	Unavailable      = Kind{name: "service-unavailable"}
	Overloaded       = Kind{name: "overloaded"}
	Internal         = Kind{name: "internal-error"}
)

// Refine returns a service's own kind, declared with its service: a name
// and title of its own, and the status of base, the shared kind it is a
// case of.
func Refine(base Kind, name, title string) Kind {
	return Kind{name: name, base: base.name, title: title}
}

// Name is the kind's name.
func (k Kind) Name() string { return k.name }

// Shared is k itself, or the shared kind a service's own kind refines.
func (k Kind) Shared() Kind {
	if k.base == "" {
		return k
	}
	return Kind{name: k.base}
}

// Title is a service's own kind's title; empty for a shared kind.
func (k Kind) Title() string { return k.title }

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error of a kind, with what its client is told: Detail and,
// for a request's broken rules, Fields; with Whole, the whole error's text
// instead, what its callers wrap around it (fmt.Errorf("%w: ...")) included.
type Error struct {
	Kind   Kind
	Detail string
	Fields []FieldError
	Whole  bool
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Detail
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return e.Detail + " (" + strings.Join(parts, "; ") + ")"
}

// Public returns e.
func (e *Error) Public() *Error { return e }

// Errorf returns an *Error of kind with a formatted detail.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Public is an error that says what its client is told: *Error, or a
// domain error that builds its *Error from fields of its own.
type Public interface {
	error
	Public() *Error
}

// Of returns the *Error of the first Public in err's chain (its detail
// the text of err when it says Whole), or nil: an internal error.
func Of(err error) *Error {
	var p Public
	if !errors.As(err, &p) {
		return nil
	}
	e := p.Public()
	if e.Whole {
		w := *e
		w.Detail = err.Error()
		return &w
	}
	return e
}
