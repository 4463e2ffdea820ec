// Package errkind gives an error the kind a client is told, and nothing
// of HTTP: one code on the error (benbjohnson/wtf's Error.Code), which
// pkg/httpapi's one table turns into a problem's status, type and title.
// Domain packages import it to give their errors a kind; a service's own
// kind (the ledger's deposit ceilings) is a Refine of a shared one and
// lives with its service.
package errkind

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is a kind of error a client can get; its name is the problem type
// (a URI path segment). The zero Kind is an internal error.
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

// Refine returns a service's own kind: its own name and title, and the
// status of base, the shared kind it is a case of. A value, not an entry
// in a registry: the kind is whole where it is declared, and the table of
// shared kinds stays one fixed table.
func Refine(base Kind, name, title string) Kind {
	return Kind{name: name, base: base.name, title: title}
}

// Name is the kind's name, the last segment of its problem type.
func (k Kind) Name() string { return k.name }

// Shared is the shared kind k is: k itself, or the kind a service's own
// kind refines.
func (k Kind) Shared() Kind {
	if k.base == "" {
		return k
	}
	return Kind{name: k.base}
}

// Title is the title of a service's own kind; empty for a shared kind,
// whose title is in pkg/httpapi's table.
func (k Kind) Title() string { return k.title }

func (k Kind) String() string { return k.name }

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error with a kind, what the client is told (Detail) and,
// for a request's broken rules, the invalid fields. Whole tells the
// client the text of the whole error instead: this one's wrapped in the
// specifics its callers add (fmt.Errorf("%w: ...")), which say what the
// client must know, such as what differs. Compare a sentinel *Error with
// errors.Is; pkg/httpapi finds it with Of.
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
// domain error that builds its *Error from fields of its own (a ceiling,
// the rules a request broke).
type Public interface {
	error
	Public() *Error
}

// Of returns what err tells its client: the *Error of the first Public
// in its chain, with Detail the whole text of err when that one says
// Whole; nil when nothing in the chain has a kind (an internal error).
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
