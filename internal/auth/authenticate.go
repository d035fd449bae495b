package auth

import (
	"errors"
	"net/http"

	"github.com/honeai/hone/internal/apierror"
)

func hint(s Scheme) string {
	if s == Basic {
		return "send 'Authorization: Basic base64(<username>:<API key>)'"
	}
	return "send 'Authorization: Bearer <API key>'"
}

func unauthorized(s Scheme, msg string) *apierror.Error {
	e := apierror.Unauthorized("%s", msg)
	e.Headers = map[string]string{"WWW-Authenticate": s.String() + ` realm="hone"`}
	return e
}

// Authenticate checks the Authorization header of r against scheme and returns the principal,
// or a 401 envelope error whose message says what was wrong without echoing credentials.
func (k *Keys) Authenticate(r *http.Request, scheme Scheme) (Principal, error) {
	got, key, err := ParseAuthorization(r.Header.Get("Authorization"))
	switch {
	case errors.Is(err, ErrNoCredentials):
		return Principal{}, unauthorized(scheme, "Missing API key: "+hint(scheme)+".")
	case got != scheme:
		return Principal{}, unauthorized(scheme, "Unsupported authorization scheme for this route: "+hint(scheme)+".")
	case err != nil:
		return Principal{}, unauthorized(scheme, "Invalid credentials: "+err.Error()+".")
	}
	rec, err := k.Verify(r.Context(), key)
	switch {
	case errors.Is(err, ErrInvalidKey):
		return Principal{}, unauthorized(scheme, "Invalid API key.")
	case errors.Is(err, ErrRevoked):
		return Principal{}, unauthorized(scheme, "This API key has been revoked.")
	case err != nil:
		return Principal{}, err
	}
	return Principal{KeyID: rec.ID, Entity: rec.Entity}, nil
}
