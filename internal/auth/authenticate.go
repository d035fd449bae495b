package auth

import (
	"context"
	"errors"

	"github.com/honeai/hone/internal/fault"
)

func hint(s Scheme) string {
	if s == Basic {
		return "send 'Authorization: Basic base64(<username>:<API key>)'"
	}
	return "send 'Authorization: Bearer <API key>'"
}

func unauthenticated(msg string) *fault.Error { return fault.Unauthenticated("%s", msg) }

// Authenticate checks the value of a request's Authorization header against scheme and
// returns the principal, or a fault.KindUnauthenticated whose message says what was wrong
// without echoing credentials (the HTTP layer answers it 401 with scheme's Challenge).
func (k *Keys) Authenticate(ctx context.Context, authorization string, scheme Scheme) (Principal, error) {
	got, key, err := ParseAuthorization(authorization)
	switch {
	case errors.Is(err, ErrNoCredentials):
		return Principal{}, unauthenticated("Missing API key: " + hint(scheme) + ".")
	case got != scheme:
		return Principal{}, unauthenticated("Unsupported authorization scheme for this route: " + hint(scheme) + ".")
	case err != nil:
		return Principal{}, unauthenticated("Invalid credentials: " + err.Error() + ".")
	}
	rec, err := k.Verify(ctx, key)
	switch {
	case errors.Is(err, ErrInvalidKey):
		return Principal{}, unauthenticated("Invalid API key.")
	case errors.Is(err, ErrRevoked):
		return Principal{}, unauthenticated("This API key has been revoked.")
	case err != nil:
		return Principal{}, err
	}
	return Principal{KeyID: rec.ID, Entity: rec.Entity}, nil
}
