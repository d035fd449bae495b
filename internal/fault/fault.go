// Package fault is the errors services return for a caller's mistake: of which kind it is,
// which request field is at fault, and what to say. Services (trace, training, auth, ...)
// know nothing of HTTP; the HTTP layer maps a fault to its status and error envelope at the
// edge (internal/apierror).
//
//	if lr <= 0 {
//		return fault.Invalid("learning_rate", "learning_rate must be positive, got %v", lr)
//	}
package fault

import (
	"errors"
	"fmt"
)

// Kind is what a fault says about the request.
type Kind int

// The kinds of fault.
const (
	// KindInvalid: the request is malformed or asks for what cannot be done (HTTP 400).
	KindInvalid Kind = iota + 1
	// KindNotFound: what the request names does not exist, or is not the caller's (404).
	KindNotFound
	// KindForbidden: the caller may not touch what it names (403).
	KindForbidden
	// KindConflict: the request clashes with the current state (409).
	KindConflict
	// KindUnavailable: the service cannot take the request now (503).
	KindUnavailable
	// KindUnauthenticated: the request carries no valid credentials (401). The HTTP layer
	// adds the challenge of the scheme it asked for (WWW-Authenticate).
	KindUnauthenticated
	// KindTooLarge: the request asks for more work or data than the server's bound (413). The
	// message names the limit.
	KindTooLarge
)

// Error is a fault: a caller's mistake, with the request field it concerns.
type Error struct {
	Kind  Kind
	Field string // the request field at fault, "" when none
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

func newf(k Kind, field, format string, args []any) *Error {
	return &Error{Kind: k, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Invalid is a KindInvalid fault of field.
func Invalid(field, format string, args ...any) *Error {
	return newf(KindInvalid, field, format, args)
}

// NotFound is a KindNotFound fault of field.
func NotFound(field, format string, args ...any) *Error {
	return newf(KindNotFound, field, format, args)
}

// Forbidden is a KindForbidden fault of field.
func Forbidden(field, format string, args ...any) *Error {
	return newf(KindForbidden, field, format, args)
}

// Conflict is a KindConflict fault of field.
func Conflict(field, format string, args ...any) *Error {
	return newf(KindConflict, field, format, args)
}

// Unavailable is a KindUnavailable fault.
func Unavailable(format string, args ...any) *Error {
	return newf(KindUnavailable, "", format, args)
}

// Unauthenticated is a KindUnauthenticated fault.
func Unauthenticated(format string, args ...any) *Error {
	return newf(KindUnauthenticated, "", format, args)
}

// TooLarge is a KindTooLarge fault of field.
func TooLarge(field, format string, args ...any) *Error {
	return newf(KindTooLarge, field, format, args)
}

// As finds the fault in err's chain.
func As(err error) (*Error, bool) {
	var f *Error
	ok := errors.As(err, &f)
	return f, ok
}

// Is tells whether err is a fault of kind k.
func Is(err error, k Kind) bool {
	f, ok := As(err)
	return ok && f.Kind == k
}
