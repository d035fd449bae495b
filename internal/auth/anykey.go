package auth

import (
	"context"
	"errors"
	"strings"
)

// AuthenticateAny checks the credentials of a route that takes the key in several forms, as
// Weave's OTLP route does: the key itself in a header of the route's (apiKey, e.g. the
// wandb-api-key header), else the Authorization header with Basic (the key as password) or
// Bearer. Faults as Authenticate's, never echoing credentials.
func (k *Keys) AuthenticateAny(ctx context.Context, apiKey, authorization string) (Principal, error) {
	key := strings.TrimSpace(apiKey)
	if key == "" {
		_, parsed, err := ParseAuthorization(authorization)
		switch {
		case errors.Is(err, ErrNoCredentials):
			return Principal{}, unauthenticated("Missing API key: send the wandb-api-key header, or 'Authorization: Basic base64(<username>:<API key>)' or 'Bearer <API key>'.")
		case err != nil:
			return Principal{}, unauthenticated("Invalid credentials: " + err.Error() + ".")
		}
		key = parsed
	} else if len(key) > maxHeaderKey || strings.ContainsAny(key, " \t") {
		return Principal{}, unauthenticated("Invalid API key.")
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
