// Package apierror defines Hone's one error envelope, the one vLLM uses:
//
//	{"error":{"message":"...","type":"...","param":<field or null>,"code":<http status>}}
//
// Every HTTP handler in Hone reports failures through this package so that all
// routes, in every area, answer errors in the same shape.
package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
)

// Error types, as vLLM and the OpenAI clients name them.
const (
	TypeBadRequest       = "BadRequestError"
	TypeAuthentication   = "AuthenticationError"
	TypePermissionDenied = "PermissionDeniedError"
	TypeNotFound         = "NotFoundError"
	TypeMethodNotAllowed = "MethodNotAllowedError"
	TypeConflict         = "ConflictError"
	TypeTooLarge         = "RequestTooLargeError"
	TypeUnprocessable    = "UnprocessableEntityError"
	TypeRateLimit        = "RateLimitError"
	TypeInternal         = "InternalServerError"
	TypeNotImplemented   = "NotImplementedError"
	TypeUnavailable      = "ServiceUnavailableError"
)

// Error is an API error: an HTTP status, a type, a message for the client and
// optionally the request field at fault.
type Error struct {
	Status  int
	Type    string
	Message string
	Param   string // "" means null
	// Headers are extra response headers (for example Allow or Retry-After).
	Headers map[string]string
}

func (e *Error) Error() string { return e.Message }

// Body is the JSON envelope.
type Body struct {
	Error Info `json:"error"`
}

// Info is the inner object of the envelope.
type Info struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// Envelope returns the JSON envelope of e.
func (e *Error) Envelope() Body {
	var p *string
	if e.Param != "" {
		s := e.Param
		p = &s
	}
	return Body{Error: Info{Message: e.Message, Type: e.Type, Param: p, Code: e.Status}}
}

// New returns an error with the given status, type, field and message.
func New(status int, typ, param, msg string) *Error {
	return &Error{Status: status, Type: typ, Param: param, Message: msg}
}

// BadRequest is a 400 naming the field at fault (param may be "").
func BadRequest(param, format string, args ...any) *Error {
	return New(http.StatusBadRequest, TypeBadRequest, param, fmt.Sprintf(format, args...))
}

// Unauthorized is a 401.
func Unauthorized(format string, args ...any) *Error {
	return New(http.StatusUnauthorized, TypeAuthentication, "", fmt.Sprintf(format, args...))
}

// Forbidden is a 403.
func Forbidden(param, format string, args ...any) *Error {
	return New(http.StatusForbidden, TypePermissionDenied, param, fmt.Sprintf(format, args...))
}

// NotFound is a 404.
func NotFound(param, format string, args ...any) *Error {
	return New(http.StatusNotFound, TypeNotFound, param, fmt.Sprintf(format, args...))
}

// Conflict is a 409.
func Conflict(param, format string, args ...any) *Error {
	return New(http.StatusConflict, TypeConflict, param, fmt.Sprintf(format, args...))
}

// TooLarge is a 413.
func TooLarge(format string, args ...any) *Error {
	return New(http.StatusRequestEntityTooLarge, TypeTooLarge, "", fmt.Sprintf(format, args...))
}

// TooManyRequests is a 429.
func TooManyRequests(format string, args ...any) *Error {
	return New(http.StatusTooManyRequests, TypeRateLimit, "", fmt.Sprintf(format, args...))
}

// Unavailable is a 503.
func Unavailable(format string, args ...any) *Error {
	return New(http.StatusServiceUnavailable, TypeUnavailable, "", fmt.Sprintf(format, args...))
}

// FromFault is the API error of a service's fault.
func FromFault(f *fault.Error) *Error {
	switch f.Kind {
	case fault.KindNotFound:
		return New(http.StatusNotFound, TypeNotFound, f.Field, f.Msg)
	case fault.KindForbidden:
		return New(http.StatusForbidden, TypePermissionDenied, f.Field, f.Msg)
	case fault.KindConflict:
		return New(http.StatusConflict, TypeConflict, f.Field, f.Msg)
	case fault.KindUnavailable:
		e := New(http.StatusServiceUnavailable, TypeUnavailable, f.Field, f.Msg)
		e.Headers = map[string]string{"Retry-After": "1"} // a busy server: retry shortly
		return e
	case fault.KindUnauthenticated:
		return New(http.StatusUnauthorized, TypeAuthentication, f.Field, f.Msg)
	case fault.KindTooLarge:
		e := TooLarge("%s", f.Msg)
		e.Param = f.Field
		return e
	default:
		return New(http.StatusBadRequest, TypeBadRequest, f.Field, f.Msg)
	}
}

// Internal is a 500 whose message never carries internals.
func Internal() *Error {
	return New(http.StatusInternalServerError, TypeInternal, "", "Internal server error")
}

// As returns the *Error inside err (a service's fault.Error mapped to its status), or a 500
// when err is neither. The bool reports whether err was an API error or a fault.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	if f, ok := fault.As(err); ok {
		return FromFault(f), true
	}
	return Internal(), false
}

// Write answers err in the envelope. Errors that are not *Error become a 500
// whose message hides the cause; the cause is logged with the request's context.
func Write(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := As(err)
	if !ok && db.IsUnavailable(err) {
		// The store is out of reach (a lost PostgreSQL connection): a 503 the client may
		// retry; database/sql reconnects by itself when the server is back.
		slog.Default().Warn("store unavailable", "err", err)
		e = Unavailable("The store is unavailable; try again shortly")
		e.Headers = map[string]string{"Retry-After": "1"}
		ok = true
	}
	if !ok {
		logger := slog.Default()
		if r != nil {
			logger.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		} else {
			logger.Error("internal error", "err", err)
		}
	}
	WriteError(w, e)
}

// WriteError writes e as the JSON envelope with e.Status.
func WriteError(w http.ResponseWriter, e *Error) {
	for k, v := range e.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.Envelope())
}
